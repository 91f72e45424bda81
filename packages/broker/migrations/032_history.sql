-- History: what the console charts and `queen stats` print, kept in coarse
-- buckets so that it costs a few rows a minute per active queue, never a row
-- per message. Two steps share each table: 60 s buckets (kept a day by
-- default) and 3600 s buckets (kept 30 days), written together by the same
-- statement (queen.history_flush_v1) and trimmed by the maintenance pass
-- (queen.history_trim_v1). docs/operations.md has the account of the cost.
--
-- Counts are added, never set: every broker counts the requests it answered
-- in memory and adds its own counts to the rows of their minute and hour
-- (insert ... on conflict do update set x = x + excluded.x). Several brokers
-- on one database each add what only they counted, so nothing is counted
-- twice and nothing needs electing. The samples (lag, depth, DLQ size) are
-- read from the listing totals by one broker a minute, the one whose flush
-- moves history_state.sampled_at first.

-- Per queue and consumer group. queue '' is the sum of every queue (the
-- overview); consumer_group '' is the queue as a whole (pushes, depth, DLQ
-- size). Keyed by name, not id: a queue's history outlives its deletion
-- until the trim reaches it.
create table queen.queue_history (
  queue          text not null,
  consumer_group text not null,
  -- The bucket's length in seconds: 60 or 3600.
  step           int not null,
  bucket         timestamptz not null,
  pushed         bigint not null default 0,
  popped         bigint not null default 0,
  -- Ack items applied with status completed/success, and with failed/dlq.
  acked          bigint not null default 0,
  failed         bigint not null default 0,
  dead_lettered  bigint not null default 0,
  -- Sampled after the minute ended (the hour's row: the largest sample of
  -- its minutes). A group's lag; a queue's depth (queue-mode cursor); the
  -- overview: every group's lag summed.
  lag            bigint not null default 0,
  -- Sampled as lag: DLQ entries of the queue (the overview: of every queue).
  dlq            bigint not null default 0,
  primary key (queue, consumer_group, step, bucket)
);
-- Rows arrive in time order, so a block range index finds the old ones for
-- the trim at almost no write cost.
create index queue_history_bucket on queen.queue_history using brin (bucket);

-- Per stream query (by id; the routes find it by name).
create table queen.stream_history (
  query_id      uuid not null,
  step          int not null,
  bucket        timestamptz not null,
  cycles        bigint not null default 0,
  -- Committed cycles without a source ack: the runner's idle flushes.
  flushes       bigint not null default 0,
  -- Source messages acked by committed cycles.
  messages_in   bigint not null default 0,
  -- Sink messages stored by committed cycles.
  emitted       bigint not null default 0,
  -- Late events the runner reported with its cycles (dropped, emitted alone or sent to a sink).
  late          bigint not null default 0,
  errors        bigint not null default 0,
  last_cycle_at timestamptz,
  -- Sampled as queue_history.lag: source messages its consumer group has not acked.
  lag           bigint not null default 0,
  primary key (query_id, step, bucket)
);
create index stream_history_bucket on queen.stream_history using brin (bucket);

-- One row: the minute whose samples were last taken.
create table queen.history_state (
  one        boolean primary key default true check (one),
  sampled_at timestamptz not null default '-infinity'
);
insert into queen.history_state default values;
