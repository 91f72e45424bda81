-- A stream query's history keeps its event-time watermark per bucket (issue
-- 43): the newest `__wm__` a committed cycle of the query wrote in the
-- bucket, epoch ms; null in processing time and in buckets where it did not
-- move. The flush that adds it takes one more array, so it is a new
-- function (queen.history_flush_v2, its file in src/sql) and 0.2.0's
-- signature goes: a 0.2.0 broker left on this database keeps its history
-- counts in memory (and logs the failed flush) until it is upgraded.
alter table queen.stream_history add column watermark_ms bigint;

drop function if exists queen.history_flush_v1(timestamptz[], text[], text[], bigint[], bigint[], bigint[], bigint[], bigint[],
  timestamptz[], uuid[], bigint[], bigint[], bigint[], bigint[], bigint[], bigint[], timestamptz[]);
