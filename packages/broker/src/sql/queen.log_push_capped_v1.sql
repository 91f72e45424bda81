-- maxSize applied (Queen's queue option, stored since 001 and only echoed
-- until now). A queue's pending messages are those after its queue-mode
-- cursor (__QUEUE_MODE__), summed over its partitions: Queen's own measure
-- (its push counts messages past the __QUEUE_MODE__ consumer's position).
-- Retained messages below the first retained offset do not count. A push
-- that would take a queue past maxSize appends nothing and the broker answers
-- 429 QUEUE_FULL.
--
-- The broker calls this function instead of queen.log_push_many_v1 only when
-- its cached options say a queue of the request has maxSize > 0, so pushes
-- into unbounded queues take exactly the path they took before.
-- The check and the append are one statement (one transaction). Each bounded
-- queue's row is locked FOR NO KEY UPDATE, in ascending name, before the
-- partition append locks. This is the queue delete's order, and the lock does
-- not block the FOR KEY SHARE of a partition being created. Bounded pushes
-- into one queue therefore count and append one at a time: two of them never
-- both fit into the last free place.
--
-- p_items and p_producer_sub as for queen.log_push_many_v1; p_counts:
-- [{queue, count}], the items of the request per queue the caller believes
-- bounded. The maxSize that counts is the one on the queue row, read under
-- its lock. Every queue is checked before anything is appended. Answers
-- log_push_many_v1's rows, or one row with status 'full' naming the first
-- queue that has no room (its maxSize and pending count).
create or replace function queen.log_push_capped_v1(p_items jsonb, p_producer_sub text, p_counts jsonb)
returns table (status text, message_id uuid, "offset" bigint, full_queue text, max_size bigint, pending bigint)
language plpgsql as $$
declare
  v_c       record;
  v_queue   uuid;
  v_max     bigint;
  v_pending bigint;
begin
  for v_c in
    select x.queue as name, x.count as n from jsonb_to_recordset(p_counts) as x(queue text, count bigint)
     order by x.queue collate "C"
  loop
    v_queue := null;
    select q.id, coalesce((q.options->>'maxSize')::bigint, 0) into v_queue, v_max
      from queen.queues q where q.name = v_c.name
       for no key update;
    if v_queue is null or v_max <= 0 then continue; end if;
    v_pending := queen.log_queue_pending_v1(v_queue);
    if v_pending + v_c.n > v_max then
      return query select 'full'::text, null::uuid, null::bigint, v_c.name, v_max, v_pending;
      return;
    end if;
  end loop;
  return query
  select m.status, m.message_id, m."offset", null::text, null::bigint, null::bigint
    from queen.log_push_many_v1(p_items, p_producer_sub) m;
end
$$;
