-- The partitions a retention pass visits, ascending.
create or replace function queen.log_retention_candidates_v1() returns setof uuid
language sql stable as $$
  select p.id
    from queen.partitions p join queen.queues q on q.id = p.queue_id
   where ((coalesce((q.options->>'retentionEnabled')::boolean, false)
           and (coalesce((q.options->>'retentionSeconds')::bigint, 0) > 0
                or coalesce((q.options->>'completedRetentionSeconds')::bigint, 0) > 0))
          or coalesce((q.options->>'maxWaitTimeSeconds')::bigint, 0) > 0)
     and p.head_offset >= p.first_offset
   order by p.id
$$;
