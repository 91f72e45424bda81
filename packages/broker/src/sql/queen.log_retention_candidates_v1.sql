-- The partitions a retention pass visits, ascending: those with a segment
-- that a rule of their queue drops now (log_retention_partition_v1's rules).
-- Segments of a partition follow each other in offsets and in time, so if
-- any segment is due the oldest one is; and its first message
-- (partitions.retained_since, migration 030) is older still. So the pass
-- reads only the partitions whose retained_since is older than now() minus
-- the shortest window of any rule of any queue (one range of an index),
-- keeps those older than their own queue's shortest window, and probes
-- their oldest segment for the exact rules; the completed rule's reader
-- offset (log_consumed_upto_v1) only for a partition whose oldest segment
-- is old enough for it.
-- Cost (issue 31: it probed every partition of every queue with retention,
-- 366 ms at 100,000 partitions kept a day with nothing due): the queues'
-- options, plus one index entry per partition past the shortest window.
-- With nothing due and similar windows that is nothing; a queue with a much
-- shorter window than the others makes the pass read the partitions of the
-- others older than that window, one row each (no segment probe). A
-- partition whose oldest segment is old enough for the completed rule but
-- not read by all its readers yet is probed at every pass, with its
-- log_consumed_upto_v1, until it is read or due by another rule.
-- enable_seqscan off: the range on retained_since is planned before its
-- bound is known, and must stay a range however the partitions grew.
-- enable_bitmapscan off: a plain index scan marks the entries of dead row
-- versions it meets (retention moves retained_since on) so that the next
-- passes skip them; a bitmap scan would visit them at every pass until
-- vacuum.
create or replace function queen.log_retention_candidates_v1() returns setof uuid
language sql stable set enable_seqscan = off set enable_bitmapscan = off as $$
  with rules as materialized (
    select q.id, o.*,
           least(case when o.enabled and o.ret_s > 0 then o.ret_s end,
                 case when o.enabled and o.done_s > 0 then o.done_s end,
                 case when o.wait_s > 0 then o.wait_s end) as window_s
      from queen.queues q
      cross join lateral (
        select coalesce((q.options->>'retentionEnabled')::boolean, false) as enabled,
               coalesce((q.options->>'retentionSeconds')::bigint, 0) as ret_s,
               coalesce((q.options->>'completedRetentionSeconds')::bigint, 0) as done_s,
               coalesce((q.options->>'maxWaitTimeSeconds')::bigint, 0) as wait_s) o
  ), horizon as (
    select now() - make_interval(secs => min(window_s)) as before from rules
  )
  select p.id
    from horizon h
    join queen.partitions p on p.retained_since < h.before
    join rules r on r.id = p.queue_id
    cross join lateral (
      select s.last_offset, s.last_created_at
        from queen.log_segments s
       where s.partition_id = p.id
       order by s.first_offset
       limit 1) oldest
   where r.window_s is not null
     and p.retained_since < now() - make_interval(secs => r.window_s)
     and p.head_offset >= p.first_offset
     and ((r.enabled and r.ret_s > 0 and oldest.last_created_at < now() - make_interval(secs => r.ret_s))
          or (r.wait_s > 0 and oldest.last_created_at < now() - make_interval(secs => r.wait_s))
          or case when r.enabled and r.done_s > 0 and oldest.last_created_at < now() - make_interval(secs => r.done_s)
                  then oldest.last_offset <= queen.log_consumed_upto_v1(p.id)
                  else false end)
   order by p.id
$$;
