-- A queue's pending lock (issue 31, migration 027): a transaction advisory
-- lock on the queue. A push takes it shared, holding its partitions' append
-- locks, before it writes queen.pending; what rewrites a group's pending
-- rows wholesale (its first wildcard pop, seek, an autoAck hand-back, a
-- group delete) takes it exclusively, so no push writes the same rows
-- meanwhile. Whoever holds it exclusively takes no partition lock after it,
-- not even through a key check (a cursor insert's foreign key locks its
-- partition row): a push waiting for it never waits for them in turn. The
-- first key keeps it apart from every other advisory lock.
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
