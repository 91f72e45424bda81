-- Timers (PROTOCOL §6): a message scheduled for later, written by the
-- transaction route (committed with it, gone with a rollback) and pushed
-- exactly once when due by the firer every replica runs. Firing claims due
-- rows FOR UPDATE SKIP LOCKED, so replicas share the work and never fire one
-- timer twice; the push and the delete commit together, so a crash before
-- commit leaves the timer due.
-- Lock order (PROTOCOL §4): timer rows are rank 2, after KV (rank 1) and
-- before partition append locks (rank 4).

create table queen.log_timers (
  id              uuid primary key,            -- UUIDv7
  queue_name      text not null,
  partition_name  text not null,
  payload         jsonb,
  transaction_id  text,                        -- null: the message gets 'timer:<id>'
  producer_sub    text,                        -- the scheduling request's subject
  fire_at         timestamptz not null,
  created_at      timestamptz not null default now(),
  encrypted       bytea                        -- ciphertext for an encrypted target queue (payload null)
);
create index log_timers_due on queen.log_timers (fire_at, id);
-- A pending timer with a transactionId is unique per (queue, partition, transactionId).
create unique index log_timers_pending_txid on queen.log_timers (queue_name, partition_name, transaction_id)
  where transaction_id is not null;
create index log_timers_queue on queen.log_timers (queue_name);

-- The functions this migration created or replaced are defined since issue 30
-- in packages/broker/src/sql/, one file each, applied after the migrations (migrate.ts).

