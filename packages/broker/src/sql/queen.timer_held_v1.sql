-- Timers never downgrade encryption either: a timer scheduled with a
-- plaintext payload for a queue that has encryptionEnabled by the time it is
-- due is held (not fired, not claimed) and counted in `held`; a broker with
-- QUEEN_ENCRYPTION_KEY encrypts its payload in place (timers.ts) and it fires
-- on the next poll. As 005's firer otherwise.
create or replace function queen.timer_held_v1(p_queue text, p_encrypted bytea) returns boolean
language sql stable as $$
  select p_encrypted is null
     and coalesce((select (q.options->>'encryptionEnabled')::boolean from queen.queues q where q.name = p_queue), false)
$$;
