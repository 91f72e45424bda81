-- A push into queues of which some have a maxSize (queen.log_queue_room_v1.sql
-- states the rule). The broker calls this function instead of
-- queen.log_push_many_v1 only when its cached options say a queue of the
-- request has maxSize > 0, so pushes into unbounded queues take exactly the
-- path they took before. The check and the append are one statement (one
-- transaction): every bounded queue is locked and counted before anything is
-- appended, so racing pushes into a nearly full queue get exactly the room
-- that is left.
--
-- p_items and p_producer_sub as for queen.log_push_many_v1; p_counts:
-- [{queue, count}], the items of the request per queue the caller believes
-- bounded. The maxSize that counts is the one on the queue row, read under
-- its lock. Answers log_push_many_v1's rows, or one row with status 'full'
-- naming the first queue that has no room (its maxSize and pending count).
create or replace function queen.log_push_capped_v1(p_items jsonb, p_producer_sub text, p_counts jsonb)
returns table (status text, message_id uuid, "offset" bigint, full_queue text, max_size bigint, pending bigint)
language plpgsql as $$
declare
  v_full record;
begin
  select f.queue, f.max_size, f.pending into v_full from queen.log_queue_first_full_v1(p_counts) f;
  if v_full.queue is not null then
    return query select 'full'::text, null::uuid, null::bigint, v_full.queue, v_full.max_size, v_full.pending;
    return;
  end if;
  return query
  select m.status, m.message_id, m."offset", null::text, null::bigint, null::bigint
    from queen.log_push_many_v1(p_items, p_producer_sub) m;
end
$$;
