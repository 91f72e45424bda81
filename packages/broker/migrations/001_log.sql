-- The log: queues, partitions, immutable messages grouped into segments,
-- per-(partition, group) cursors with leases, failure counts and the DLQ.
-- Message rows are written once by queen.log_push_one_v1 and deleted only by
-- retention (whole segments) or queue delete: pop, ack, lease and DLQ write
-- cursor, failure and DLQ rows only.

create schema if not exists queen;

create table queen.queues (
  id          uuid primary key default gen_random_uuid(),
  name        text not null unique,
  namespace   text,
  task        text,
  options     jsonb not null default '{}'::jsonb,
  created_at  timestamptz not null default now(),
  updated_at  timestamptz not null default now()
);

create table queen.partitions (
  id                  uuid primary key default gen_random_uuid(),
  queue_id            uuid not null references queen.queues(id) on delete cascade,
  queue_name          text not null,
  name                text not null,
  head_offset         bigint not null default 0,   -- last allocated offset
  first_offset        bigint not null default 1,   -- lowest retained offset (head+1 when empty)
  last_created_at     timestamptz,                 -- createdAt of the head message: the clamp for the next one
  segment_first       bigint,                      -- first offset of the open segment, null when none is open
  segment_started_at  timestamptz,
  created_at          timestamptz not null default now(),
  last_activity       timestamptz not null default now(),
  unique (queue_id, name)
);

create table queen.messages (
  partition_id    uuid not null,
  msg_offset      bigint not null,
  id              uuid not null,
  transaction_id  text,             -- the client's; null: the wire transactionId is id::text
  trace_id        uuid,
  payload         jsonb,
  encrypted       bytea,
  producer_sub    text,
  created_at      timestamptz not null,
  primary key (partition_id, msg_offset)
);
-- Dedup key while retained; probed under the append lock, enforced here too.
-- Only transactionIds a client chose are stored and indexed: a message pushed
-- without one answers to its id (queen.message_offset_v1 decodes the offset
-- from it), which spares every such message a text copy of its id and an
-- index entry (bench: ~40 % more rows per second at batch 100).
create unique index messages_transaction_id on queen.messages (partition_id, transaction_id) where transaction_id is not null;

create table queen.log_segments (
  partition_id      uuid not null,
  first_offset      bigint not null,
  last_offset       bigint not null,
  first_created_at  timestamptz not null,
  last_created_at   timestamptz not null,
  sealed            boolean not null default false,
  primary key (partition_id, first_offset)
);

create table queen.cursors (
  partition_id       uuid not null references queen.partitions(id) on delete cascade,
  consumer_group     text not null,
  cursor_offset      bigint not null default 0,
  lease_id           uuid,
  lease_expires_at   timestamptz,
  lease_last_offset  bigint,
  last_consumed_at   timestamptz,
  last_acked_at      timestamptz,
  created_at         timestamptz not null default now(),
  primary key (partition_id, consumer_group)
);
create index cursors_lease_id on queen.cursors (lease_id) where lease_id is not null;

-- Failed deliveries per (message, group); rows at or below the cursor are discarded.
create table queen.failures (
  partition_id    uuid not null,
  consumer_group  text not null,
  msg_offset      bigint not null,
  retry_count     int not null,
  primary key (partition_id, consumer_group, msg_offset)
);

create table queen.dlq (
  id              bigserial primary key,
  partition_id    uuid not null,
  consumer_group  text not null,
  msg_offset      bigint not null,
  error_message   text,
  retry_count     int not null,
  failed_at       timestamptz not null default now(),
  unique (partition_id, consumer_group, msg_offset)
);

-- Subscription start of a named group on a queue, fixed at its first pop (PROTOCOL §3.6).
create table queen.subscriptions (
  consumer_group  text not null,
  queue_id        uuid not null references queen.queues(id) on delete cascade,
  mode            text not null,
  start_at        timestamptz,          -- null = from the beginning
  created_at      timestamptz not null default now(),
  primary key (consumer_group, queue_id)
);

create table queen.flags (
  name   text primary key,
  value  jsonb not null
);

-- The functions this migration created or replaced are defined since issue 30
-- in packages/broker/src/sql/, one file each, applied after the migrations (migrate.ts).

