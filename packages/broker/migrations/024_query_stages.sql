-- Queries that evolve (issue 33). A registered query keeps its chain's stages
-- (name, kind, whether it holds state, a hash of its state's meaning and a
-- hash of its code), so a new version is compared stage by stage; the last
-- version proposed (by a plan, or a run that was refused) is kept for
-- `queen streams plan <query>`.
alter table queen_streams.queries add column stages jsonb;
alter table queen_streams.queries add column proposed jsonb;
-- The version a runner must be of to commit: a hash of the stages, code
-- hashes included (config_hash covers the structure only). Null: a query
-- registered without stages, never fenced.
alter table queen_streams.queries add column version text;
-- stateTtlSeconds of a gate (issue 33): the maintenance pass deletes a key's
-- row once it has not been written for this long. Null: rows never expire.
alter table queen_streams.queries add column state_ttl_seconds int;

-- A migration of a query's state to a new version, one row per partition
-- that held state when the version was registered: a runner claims it (for
-- lease seconds), rewrites the partition's rows in one transaction under the
-- partition lock, and marks it done; a done row is never applied again.
create table queen_streams.state_migrations (
  query_id         uuid not null references queen_streams.queries(query_id) on delete cascade,
  partition_id     uuid not null,
  version          text not null,
  claim_id         uuid,
  claim_expires_at timestamptz,
  done_at          timestamptz,
  rows_written     int,
  primary key (query_id, partition_id, version)
);
