-- PROTOCOL §8, with `error` null when the failure carries no text (the
-- broker words every failure from the catalogue), and the idle flush's guard
-- (queen_streams.flush_pending_v1, or for a join's shard
-- queen_streams.flush_sources_pending_v1) before an element that carries
-- `flush_before`; an element without it (every cycle with an ack) runs as
-- before, one jsonb key test more. A lookup's `kv_reads` are locked first
-- (queen.kv_read_lock_v1, the KV package's), rank 1 before rank 3.
create or replace function queen.log_streams_cycle_v1(p_elements jsonb) returns jsonb
language plpgsql set enable_seqscan = off as $$
declare
  v_el      jsonb;
  v_out     jsonb := '[]'::jsonb;
  v_res     jsonb;
  v_base    jsonb;
  v_code    text;
  v_error   text;
  v_extra   text;
  v_before  timestamptz;
  v_pending boolean;
begin
  -- A lookup's KV reads: the KV's locks (rank 1) before the query row (rank 3).
  if exists (select 1 from jsonb_array_elements(p_elements) e where e ? 'kv_reads') then
    perform queen.kv_read_lock_v1(p_elements);
  end if;
  perform 1 from queen_streams.queries q
   where q.query_id in (select (e->>'query_id')::uuid from jsonb_array_elements(p_elements) e)
   order by q.query_id for key share;
  perform pg_advisory_xact_lock(h)
    from (select distinct hashtextextended((e->>'query_id')::uuid::text || ':' || (e->>'partition_id')::uuid::text, 0) as h
            from jsonb_array_elements(p_elements) e
           order by 1) s;

  for v_el in select e from jsonb_array_elements(p_elements) with ordinality as t(e, n) order by n loop
    v_base := jsonb_build_object(
      'query_id', (v_el->>'query_id')::uuid::text, 'partition_id', (v_el->>'partition_id')::uuid::text,
      'queueName', (select p.queue_name from queen.partitions p where p.id = (v_el->>'partition_id')::uuid));
    begin
      -- Under the shard lock taken above: no cycle of this (query, partition) moves the cursor meanwhile.
      if v_el ? 'flush_before' then
        v_before := timestamptz 'epoch' + (v_el->>'flush_before')::bigint * interval '1 millisecond';
        -- A join's flush names its source partitions (flush_sources): its partition_id is a shard.
        if v_el ? 'flush_sources' then
          v_pending := queen_streams.flush_sources_pending_v1(v_el->'flush_sources', coalesce(v_el->>'consumer_group', '__QUEUE_MODE__'), v_before);
        else
          v_pending := queen_streams.flush_pending_v1((v_el->>'partition_id')::uuid, coalesce(v_el->>'consumer_group', '__QUEUE_MODE__'), v_before);
        end if;
        if v_pending then
          perform queen_streams.fail_v2('FLUSH_DEFERRED');
        end if;
      end if;
      v_res := v_base || queen_streams.apply_element(v_el);
    exception when sqlstate 'QS001' then
      get stacked diagnostics v_code = message_text, v_error = pg_exception_detail, v_extra = pg_exception_hint;
      v_res := v_base || jsonb_build_object('success', false, 'state_ops_applied', 0, 'state_results', '[]'::jsonb,
        'push_results', '[]'::jsonb, 'ack_result', null, 'error', nullif(v_error, ''), 'code', v_code)
        || coalesce(nullif(v_extra, '')::jsonb, '{}'::jsonb);
    end;
    v_out := v_out || jsonb_build_array(jsonb_build_object('idx', v_el->'idx', 'result', v_res));
  end loop;
  return v_out;
end
$$;
