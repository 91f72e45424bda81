-- The partitions a retention pass visits, ascending: those with a segment
-- that a rule of their queue drops now (log_retention_partition_v1's rules).
-- Segments of a partition follow each other in offsets and in time, so if
-- any segment is due the oldest one is; and its first message
-- (partitions.retained_since, migration 030) is older still. So, per queue
-- with retention, one probe of partitions_retained_since reads the
-- partitions whose retained_since is older than the queue's shortest
-- window; their oldest segment is probed for the exact rules, and the
-- completed rule's reader offset (log_consumed_upto_v1) computed only for a
-- partition whose oldest segment is old enough for it.
-- Cost (issue 31: it probed the oldest segment of every partition of every
-- queue with retention, 366 ms at 100,000 partitions kept a day with
-- nothing due): every queue's options and an index probe per queue with
-- retention, plus the partitions old enough for a rule. Those are the due
-- ones, and under completedRetentionSeconds those old enough but not read
-- by every reader yet: each of these is probed again at every pass, with
-- its log_consumed_upto_v1, until it is read.
-- The planner settings: the probes stay probes (a nested loop over the
-- queues, an index range each), however the tables grew after the plan was
-- made; not a hash or merge join over the whole index. A plain index scan
-- marks the entries of dead row versions it meets (retention moves
-- retained_since on) for the next passes to skip; a bitmap scan would visit
-- them at every pass until vacuum.
create or replace function queen.log_retention_candidates_v1() returns setof uuid
language sql stable
set enable_seqscan = off set enable_hashjoin = off set enable_mergejoin = off set enable_bitmapscan = off as $$
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
  )
  select p.id
    from rules r
    join queen.partitions p
      on p.queue_id = r.id and p.retained_since < now() - make_interval(secs => r.window_s)
    cross join lateral (
      select s.last_offset, s.last_created_at
        from queen.log_segments s
       where s.partition_id = p.id
       order by s.first_offset
       limit 1) oldest
   where r.window_s is not null
     and p.head_offset >= p.first_offset
     and ((r.enabled and r.ret_s > 0 and oldest.last_created_at < now() - make_interval(secs => r.ret_s))
          or (r.wait_s > 0 and oldest.last_created_at < now() - make_interval(secs => r.wait_s))
          or case when r.enabled and r.done_s > 0 and oldest.last_created_at < now() - make_interval(secs => r.done_s)
                  then oldest.last_offset <= queen.log_consumed_upto_v1(p.id)
                  else false end)
   order by p.id
$$;
