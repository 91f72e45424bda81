-- The all-or-nothing form of queen.log_queue_room_v1, for a write that must
-- store every item or none (push, transaction, @queen-mq/pg enqueue, a stream
-- cycle's sink pushes). p_counts: [{queue, count}], the items per queue.
-- Locks every bounded queue among them (log_queue_room_v1) and answers the
-- first one, by name, whose pending messages plus its items would pass its
-- maxSize (zero rows: everything fits). The caller then appends nothing.
create or replace function queen.log_queue_first_full_v1(p_counts jsonb)
returns table (queue text, max_size bigint, pending bigint, count bigint)
language sql as $$
  with c as (select x.queue, sum(x.count)::bigint as count from jsonb_to_recordset(p_counts) as x(queue text, count bigint) group by x.queue),
       r as materialized (select * from queen.log_queue_room_v1(array(select c.queue from c)))
  select r.queue, r.max_size, r.pending, c.count
    from r join c on c.queue = r.queue
   where r.pending + c.count > r.max_size
   order by r.queue collate "C"
   limit 1
$$;
