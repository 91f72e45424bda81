-- A queue's pending lock (issue 31, migration 027): a transaction advisory
-- lock on the queue. A push takes it shared, holding its partitions' append
-- locks, before it writes queen.pending (queen.log_append_advance_v1 takes
-- it with the same keys in line, to spare a push a call); what rewrites a group's pending
-- rows wholesale (its first wildcard pop, seek, an autoAck hand-back, a
-- group delete) takes it exclusively, so no push writes the same rows
-- meanwhile.
-- Exclusively it is tried, not waited for, for up to p_patience_ms: a
-- waiting exclusive request would queue every later shared request behind
-- it, and a transaction that pushes twice (an app transaction, say) holds
-- the lock shared and may wait for a partition a queued push holds. Answers
-- whether it was taken; past the patience, p_block says whether to wait
-- after all (a caller that cannot do without it) or give up.
-- The first key keeps it apart from every other advisory lock.
create or replace function queen.log_pending_lock_v1(p_queue_id uuid, p_shared boolean, p_patience_ms int default 0, p_block boolean default true) returns boolean
language plpgsql as $$
declare
  v_until timestamptz := clock_timestamp() + make_interval(secs => p_patience_ms / 1000.0);
begin
  if p_shared then
    perform pg_advisory_xact_lock_shared(20271, hashtext(p_queue_id::text));
    return true;
  end if;
  loop
    if pg_try_advisory_xact_lock(20271, hashtext(p_queue_id::text)) then return true; end if;
    exit when clock_timestamp() >= v_until;
    perform pg_sleep(0.002);
  end loop;
  if not p_block then return false; end if;
  perform pg_advisory_xact_lock(20271, hashtext(p_queue_id::text));
  return true;
end
$$;
