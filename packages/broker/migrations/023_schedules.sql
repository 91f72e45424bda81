-- Recurring schedules: a cron expression in a time zone that pushes one
-- message per fire time into a queue. The fire times are computed by the
-- broker (croner, the library of the cron window), so this table only holds
-- the definition and the next fire time still to push.
--
-- Firing (packages/broker/src/schedule-firer.ts) claims due rows FOR UPDATE
-- SKIP LOCKED, pushes through the allocator (queen.log_append_v1) and
-- advances next_fire_at in the same transaction: two brokers never both push
-- one fire time, a crash before commit leaves it due. The message's
-- transactionId is 'schedule:<name>:<fire time ISO>', so the allocator's
-- dedup is the second line of defence.
-- Lock order (PROTOCOL §4): schedule rows are taken like timer rows (rank 2),
-- before partition append locks (rank 4); nothing else locks them.

create table queen.schedules (
  name            text primary key,
  cron            text not null,
  time_zone       text not null,
  queue_name      text not null,
  partition_name  text not null,
  payload         jsonb,
  missed          text not null check (missed in ('skip', 'one', 'all')),
  next_fire_at    timestamptz not null,        -- the earliest fire time not pushed yet
  last_fire_at    timestamptz,                 -- the latest fire time pushed
  producer_sub    text,                        -- the creating request's subject, stamped on every message
  created_at      timestamptz not null default now(),
  updated_at      timestamptz not null default now()
);
create index schedules_due on queen.schedules (next_fire_at);
