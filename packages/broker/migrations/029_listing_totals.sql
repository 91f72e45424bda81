-- Listing totals (issue 31): what the queue and group listings, the console
-- and /metrics show per queue and per (queue, consumer group), kept as rows
-- so that a page reads one row per queue or group on it, never the
-- partitions and cursors under it (a queue of 50,000 partitions on a page
-- made every page read 50,000 partitions and cursors).
--
-- The totals are recounted by queen.listing_totals_refresh_v1 (src/sql) for
-- the partitions a broker wrote to (listing-totals.ts), shortly after the
-- write and off its path: a push or an ack writes no row here, so pushes to
-- different partitions of one queue share no row. Each partition's and each
-- cursor's share of the totals, as last counted, is kept beside them
-- (partition_tallies, cursor_tallies), so that recounting a partition
-- changes its queue's totals by the difference, whatever the queue's size.
-- docs/listing-totals.md says how fresh the numbers are.

-- Per queue. depth and oldest_pending_at are through the queue-mode cursor
-- (__QUEUE_MODE__; a partition without one counts from its first retained
-- message); retained is what retention keeps, pushed the sum of the heads.
create table queen.queue_totals (
  queue_id          uuid primary key references queen.queues (id) on delete cascade,
  queue_name        text not null,
  partitions        int not null default 0,
  depth             bigint not null default 0,
  retained          bigint not null default 0,
  pushed            bigint not null default 0,
  dlq               bigint not null default 0,
  oldest_pending_at timestamptz,
  last_activity     timestamptz,
  refreshed_at      timestamptz not null
);
-- /metrics' top N deepest queues and largest DLQs, read from the top of an index.
create index queue_totals_depth on queen.queue_totals (depth desc, queue_name);
create index queue_totals_dlq on queen.queue_totals (dlq desc, queue_name) where dlq > 0;

-- Per (queue, group) that has a cursor on one of the queue's partitions.
-- retained: the retained messages of the partitions the group has a cursor
-- on (a partition without one counts whole in a stream query's lag).
create table queen.group_totals (
  queue_id            uuid not null references queen.queues (id) on delete cascade,
  consumer_group      text not null,
  queue_name          text not null,
  cursors             int not null default 0,
  lag                 bigint not null default 0,
  retained            bigint not null default 0,
  partitions_with_lag int not null default 0,
  oldest_pending_at   timestamptz,
  last_acked_at       timestamptz,
  refreshed_at        timestamptz not null,
  primary key (queue_id, consumer_group)
);
-- The group listing walks group names (a skip scan) and reads a page's rows in its bytewise order.
create index group_totals_group on queen.group_totals (consumer_group collate "C", queue_name);
-- /metrics' top N lagging (queue, group) pairs.
create index group_totals_lag on queen.group_totals (lag desc, queue_name, consumer_group);

-- One partition's share of its queue's totals, as last counted.
create table queen.partition_tallies (
  partition_id      uuid primary key,
  queue_id          uuid not null references queen.queues (id) on delete cascade,
  depth             bigint not null,
  retained          bigint not null,
  pushed            bigint not null,
  dlq               bigint not null,
  oldest_pending_at timestamptz
);
-- The oldest pending message of a queue is the least of its partitions' (one index probe).
create index partition_tallies_oldest on queen.partition_tallies (queue_id, oldest_pending_at);

-- One cursor's share of its (queue, group) totals, as last counted.
create table queen.cursor_tallies (
  partition_id      uuid not null,
  consumer_group    text not null,
  queue_id          uuid not null references queen.queues (id) on delete cascade,
  lag               bigint not null,
  retained          bigint not null,
  oldest_pending_at timestamptz,
  last_acked_at     timestamptz,
  primary key (partition_id, consumer_group)
);
-- A group's oldest pending message and last ack on a queue are the least and
-- the greatest of its cursors' (one index probe each).
create index cursor_tallies_oldest on queen.cursor_tallies (queue_id, consumer_group, oldest_pending_at);
create index cursor_tallies_acked on queen.cursor_tallies (queue_id, consumer_group, last_acked_at);
