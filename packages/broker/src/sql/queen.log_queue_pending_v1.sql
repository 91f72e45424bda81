-- Pending messages of one queue, as defined above.
create or replace function queen.log_queue_pending_v1(p_queue_id uuid) returns bigint
language sql stable as $$
  select coalesce(sum(greatest(p.head_offset - greatest(coalesce(c.cursor_offset, 0), p.first_offset - 1), 0)), 0)::bigint
    from queen.partitions p
    left join queen.cursors c on c.partition_id = p.id and c.consumer_group = '__QUEUE_MODE__'
   where p.queue_id = p_queue_id
$$;
