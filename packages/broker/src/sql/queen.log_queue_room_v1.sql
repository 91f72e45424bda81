-- maxSize's one rule, for every write path: a queue with maxSize > 0 holds at
-- most maxSize pending messages, pending being those after its queue-mode
-- cursor (queen.log_queue_pending_v1). A writer into bounded queues calls this
-- before its first append lock: it locks the rows of the bounded queues among
-- p_queues FOR NO KEY UPDATE, in ascending name (the queue delete's order; it
-- does not block the FOR KEY SHARE of a partition being created), then counts
-- their pending messages under those locks. Every writer of a bounded queue
-- takes that lock, so two of them never both count the same free place: the
-- room each sees is what the ones before it left.
--
-- Lock order (PROTOCOL §4): after ranks 1-3 (KV, timer and schedule rows,
-- stream query and shard locks), before rank 4 (partition append locks).
-- Answers one row per bounded queue, in ascending name; an unbounded or
-- missing queue answers nothing and is not locked.
-- The count is a statement of its own, after the locks: in READ COMMITTED it
-- reads with a snapshot taken once the locks are held, so it sees what the
-- writer that held a lock before committed.
create or replace function queen.log_queue_room_v1(p_queues text[])
returns table (queue text, max_size bigint, pending bigint)
language plpgsql as $$
#variable_conflict use_column
declare
  v_ids uuid[];
begin
  select coalesce(array_agg(l.id order by l.name collate "C"), '{}') into v_ids
    from (select q.id, q.name
            from queen.queues q
           where q.name = any(p_queues) and coalesce((q.options->>'maxSize')::bigint, 0) > 0
           order by q.name collate "C"
             for no key update) l;
  if cardinality(v_ids) = 0 then return; end if;
  return query
  select q.name, (q.options->>'maxSize')::bigint, queen.log_queue_pending_v1(q.id)
    from queen.queues q
   where q.id = any(v_ids)
   order by q.name collate "C";
end
$$;
