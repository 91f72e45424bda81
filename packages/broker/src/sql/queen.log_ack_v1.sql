-- Kept for brokers of the previous release while a rolling upgrade runs
-- (docs/operations.md: a migration is safe to apply while older brokers
-- run); this release's broker never calls it. The ack as those brokers
-- send it, jsonb items, answered by queen.log_ack_v2 as before. Dropped by
-- a migration of the release after.
create or replace function queen.log_ack_v1(p_group text, p_items jsonb) returns jsonb
language sql as $$
  select a.r_answer from queen.log_ack_v2(p_group, p_items, null, null, null, null, false) a
$$;
