-- The partitions a retention pass visits, ascending: those with a segment
-- that a rule of their queue drops now (log_retention_partition_v1's rules).
-- Segments of a partition follow each other in offsets and in time, so if
-- any segment is due the oldest one is: one probe of the oldest segment per
-- partition of a queue with retention, in this one statement, instead of a
-- transaction per such partition in the pass (issue 31: a pass over 20,000
-- retained partitions with nothing to drop was 20,000 transactions). The
-- completed rule's reader offset (log_consumed_upto_v1) is computed only for
-- a partition whose oldest segment is old enough.
create or replace function queen.log_retention_candidates_v1() returns setof uuid
language sql stable as $$
  select p.id
    from queen.queues q
    cross join lateral (
      select coalesce((q.options->>'retentionEnabled')::boolean, false) as enabled,
             coalesce((q.options->>'retentionSeconds')::bigint, 0) as ret_s,
             coalesce((q.options->>'completedRetentionSeconds')::bigint, 0) as done_s,
             coalesce((q.options->>'maxWaitTimeSeconds')::bigint, 0) as wait_s) o
    join queen.partitions p on p.queue_id = q.id
    cross join lateral (
      select s.last_offset, s.last_created_at
        from queen.log_segments s
       where s.partition_id = p.id
       order by s.first_offset
       limit 1) oldest
   where ((o.enabled and (o.ret_s > 0 or o.done_s > 0)) or o.wait_s > 0)
     and p.head_offset >= p.first_offset
     and ((o.enabled and o.ret_s > 0 and oldest.last_created_at < now() - make_interval(secs => o.ret_s))
          or (o.wait_s > 0 and oldest.last_created_at < now() - make_interval(secs => o.wait_s))
          or case when o.enabled and o.done_s > 0 and oldest.last_created_at < now() - make_interval(secs => o.done_s)
                  then oldest.last_offset <= queen.log_consumed_upto_v1(p.id)
                  else false end)
   order by p.id
$$;
