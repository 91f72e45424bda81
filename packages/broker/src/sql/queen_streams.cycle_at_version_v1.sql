-- Queries that evolve (issue 33).
-- A cycle of a given version: the query row FOR KEY SHARE first (the lock
-- log_streams_cycle_v1 takes next, so the order is unchanged), and a runner
-- of another version than the registered one is answered
-- QUERY_VERSION_CHANGED without touching anything. A register holds the row
-- FOR UPDATE, so a cycle in flight commits before the new version is
-- recorded and every later one of the old version is refused.
create or replace function queen_streams.cycle_at_version_v1(p_elements jsonb, p_version text) returns jsonb
language plpgsql as $$
declare
  v_qid  uuid := (p_elements->0->>'query_id')::uuid;
  v_hash text;
begin
  -- A lookup's KV reads are rank 1: locked before the query row.
  if exists (select 1 from jsonb_array_elements(p_elements) e where e ? 'kv_reads') then
    perform queen.kv_read_lock_v1(p_elements);
  end if;
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
