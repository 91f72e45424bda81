-- Streams (PROTOCOL §7, §8): registered queries and their state rows, and the
-- cycle procedure that commits state ops, sink pushes and the source ack in
-- one transaction. State rows have no FK to queen.partitions on purpose:
-- retention and partition cleanup must never delete stream state (a surviving
-- row vetoes the partition's cleanup instead).

create schema if not exists queen_streams;

create table queen_streams.queries (
  query_id     uuid primary key default gen_random_uuid(),
  name         text not null unique,
  source_queue text not null,
  sink_queue   text,
  config_hash  text not null,
  created_at   timestamptz not null default now(),
  updated_at   timestamptz not null default now()
);

-- Versions come from one sequence: strictly increasing per write and never
-- reused for a key, even across delete and re-create, so a compare-and-set on
-- a version read before a delete can never match the re-created row.
create sequence queen_streams.state_version_seq;

create table queen_streams.state (
  query_id      uuid not null references queen_streams.queries(query_id),
  partition_id  uuid not null,
  -- C collation: state/get answers in bytewise key order, and the primary key
  -- index serves both that order and literal prefix ranges.
  key           text collate "C" not null,
  value         jsonb,
  version       bigint not null,
  updated_at    timestamptz not null default now(),
  primary key (query_id, partition_id, key)
);
-- Partition cleanup asks "does any state row reference this partition?".
create index state_partition on queen_streams.state (partition_id);

-- The functions this migration created or replaced are defined since issue 30
-- in packages/broker/src/sql/, one file each, applied after the migrations (migrate.ts).

