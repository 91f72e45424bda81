-- A raw caller's sink pushes ({queue, partition?} or {partition_id}, as
-- 006): partitions resolved (they must exist), then the broker's own path,
-- queen_streams.push_sink_runs_v1, and the one shaper above.
create or replace function queen_streams.push_sink_items_v1(p_items jsonb, p_producer_sub text) returns jsonb
language plpgsql set enable_seqscan = off as $$
declare
  v_items   jsonb;
  v_pids    uuid[];
  v_queues  text[];
  v_txids   text[];
  v_traces  jsonb[];
  v_missing jsonb;
begin
  if jsonb_array_length(p_items) = 0 then return '[]'::jsonb; end if;
  with t as (
    select n, e, coalesce((e->>'partition_id')::uuid,
             (select p.id from queen.partitions p where p.queue_name = e->>'queue' and p.name = coalesce(e->>'partition', 'Default'))) as pid
      from jsonb_array_elements(p_items) with ordinality as x(e, n))
  select jsonb_agg(jsonb_build_object('partition_id', t.pid, 'payload', coalesce(t.e->'payload', 'null'::jsonb),
                     'transaction_id', t.e->>'transactionId', 'trace_id', t.e->>'traceId')
                   || case when t.e ? 'encrypted' then jsonb_build_object('encrypted', t.e->'encrypted') else '{}'::jsonb end order by t.n),
         array_agg(t.pid order by t.n), array_agg(p.queue_name order by t.n),
         array_agg(t.e->>'transactionId' order by t.n), array_agg(t.e->'traceId' order by t.n),
         (array_agg(t.e order by t.n) filter (where t.pid is null))[1]
    into v_items, v_pids, v_queues, v_txids, v_traces, v_missing
    from t left join queen.partitions p on p.id = t.pid;
  if v_missing is not null then
    raise exception 'partition %/% does not exist', v_missing->>'queue', coalesce(v_missing->>'partition', 'Default') using errcode = 'P0002';
  end if;
  return queen_streams.push_results_v1(queen_streams.push_sink_runs_v1(v_items, p_producer_sub), v_pids, v_queues, v_txids, v_traces);
end
$$;
