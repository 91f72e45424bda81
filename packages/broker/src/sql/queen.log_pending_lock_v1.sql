-- A queue's pending lock (issue 31, migration 027): a transaction advisory
-- lock on the queue. A push takes it shared before it writes queen.pending;
-- what rewrites a group's pending rows wholesale (its first wildcard pop,
-- seek, an autoAck hand-back, a group delete) takes it exclusively, so no
-- push is writing the same rows meanwhile. In the lock order (PROTOCOL §4)
-- it sits with the append locks (rank 4): a push takes it after its
-- partitions, the others take no partition lock and take it before any
-- cursor row. The first key keeps it apart from every other advisory lock.
create or replace function queen.log_pending_lock_v1(p_queue_id uuid, p_shared boolean) returns void
language plpgsql as $$
begin
  if p_shared then
    perform pg_advisory_xact_lock_shared(20271, hashtext(p_queue_id::text));
  else
    perform pg_advisory_xact_lock(20271, hashtext(p_queue_id::text));
  end if;
end
$$;
