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

-- A cycle of a given version: the query row FOR KEY SHARE first (the lock
-- log_streams_cycle_v1 takes next, so the order is unchanged), and a runner
-- of another version than the registered one is answered
-- QUERY_VERSION_CHANGED without touching anything. A register holds the row
-- FOR UPDATE, so a cycle in flight commits before the new version is
-- recorded and every later one of the old version is refused.
create function queen_streams.cycle_at_version_v1(p_elements jsonb, p_version text) returns jsonb
language plpgsql as $$
declare
  v_qid  uuid := (p_elements->0->>'query_id')::uuid;
  v_hash text;
begin
  select q.version into v_hash from queen_streams.queries q where q.query_id = v_qid for key share;
  if found and v_hash is distinct from p_version then
    return jsonb_build_array(jsonb_build_object('idx', p_elements->0->'idx', 'result', jsonb_build_object(
      'success', false, 'query_id', v_qid::text, 'partition_id', (p_elements->0->>'partition_id')::uuid::text,
      'queueName', (select p.queue_name from queen.partitions p where p.id = (p_elements->0->>'partition_id')::uuid),
      'state_ops_applied', 0, 'state_results', '[]'::jsonb, 'push_results', '[]'::jsonb, 'ack_result', null,
      'code', 'QUERY_VERSION_CHANGED')));
  end if;
  return queen.log_streams_cycle_v1(p_elements);
end
$$;
