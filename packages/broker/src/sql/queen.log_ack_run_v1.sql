-- Kept for brokers of the previous release while a rolling upgrade runs
-- (docs/operations.md: a migration is safe to apply while older brokers
-- run); this release's broker never calls it. Those brokers send a pop's
-- run here first and, when it answers ok = false having written nothing,
-- the same items to queen.log_ack_v1. It now always declines, so their acks
-- take that second call, into queen.log_ack_v2: the same answers, one round
-- trip more, until they are replaced. Dropped by a migration of the release
-- after.
create or replace function queen.log_ack_run_v1(p_group text, p_partition_id uuid, p_lease uuid, p_offsets bigint[], p_txids text[])
returns table (ok boolean, released bigint, queue_name text, partition_name text)
language sql as $$
  select false, null::bigint, null::text, null::text
$$;
