-- One cycle element, as 006, its source ack through the ack route's own
-- lock, fence and move (queen_streams.ack_source_v1). Same locks in the same
-- order, same answer; a join's element acks its source_acks too, and a
-- lookup's is checked against the KV versions it read.
create or replace function queen_streams.apply_element(p_el jsonb) returns jsonb
language plpgsql set enable_seqscan = off as $$
declare
  v_qid        uuid := (p_el->>'query_id')::uuid;
  v_pid        uuid := (p_el->>'partition_id')::uuid;
  v_group      text := coalesce(p_el->>'consumer_group', '__QUEUE_MODE__');
  v_sub        text := p_el->>'producer_sub';
  v_applied    int := 0;
  v_state_res  jsonb := '[]'::jsonb;
  v_push_res   jsonb := '[]'::jsonb;
  v_ack        jsonb := p_el->'ack';
  v_ack_res    jsonb := null;
  v_source_res jsonb;
  v_bad        jsonb;
  v_release    boolean := coalesce((p_el->>'release_lease')::boolean, true);
  v_full       record;
begin
  -- Rank 3: the query row first (a drop or reset holding it FOR UPDATE makes
  -- us wait, then find it gone), then the (query, partition) shard lock, so a
  -- flush and a cycle of one shard serialise before either writes.
  perform 1 from queen_streams.queries q where q.query_id = v_qid for key share;
  if not found then
    perform queen_streams.fail_v2('QUERY_NOT_FOUND');
  end if;
  perform pg_advisory_xact_lock(hashtextextended(v_qid::text || ':' || v_pid::text, 0));

  -- A lookup's KV reads: locked shared before the query row (rank 1, see
  -- queen_streams.log_streams_cycle_v1), so the versions checked here are the
  -- ones still committed when this transaction commits.
  if p_el ? 'kv_reads' then
    v_bad := queen.kv_read_check_v1(p_el->'kv_reads');
    if v_bad is not null then
      perform queen_streams.fail_v2('VERSION_CONFLICT', v_bad);
    end if;
  end if;

  -- Sink queues with a maxSize (`sink_bounded`: [{queue, count}], sent only
  -- when the broker knows one is bounded): locked and counted after rank 3 and
  -- before rank 4 (queen.log_queue_room_v1.sql). One without room fails the
  -- element before it writes anything: the sink is backpressure, the cycle
  -- waits, and its source messages stay unacknowledged.
  if p_el ? 'sink_bounded' then
    select f.* into v_full from queen.log_queue_first_full_v1(p_el->'sink_bounded') f;
    if v_full.queue is not null then
      perform queen_streams.fail_v2('QUEUE_FULL', jsonb_build_object('queue', v_full.queue, 'pending', v_full.pending,
        'maxSize', v_full.max_size, 'count', v_full.count, 'retryAfter', 1));
    end if;
  end if;

  -- State ops, in array order, each a compare-and-set when expected_version is given.
  v_state_res := queen_streams.apply_state_ops_v1(v_qid, v_pid, coalesce(p_el->'state_ops', '[]'::jsonb));
  v_applied := (v_state_res->>'applied')::int;
  v_state_res := coalesce(v_state_res->'results', '[]'::jsonb);

  -- Sink pushes (rank 4): every target's append lock in ascending id order,
  -- then each target partition's run through the one allocator. The broker
  -- resolves the request's push_items into sink_items (partitions ensured
  -- first, in their own transaction); an element that still carries
  -- push_items came from elsewhere and would lose its pushes: refused.
  if coalesce(p_el->'push_items', '[]'::jsonb) not in ('[]'::jsonb, 'null'::jsonb) then
    raise exception 'a cycle element carries sink_items (partition ids), not push_items' using errcode = '22023';
  end if;
  if p_el ? 'sink_items' then
    v_push_res := queen_streams.push_sink_runs_v1(p_el->'sink_items', v_sub);
  end if;

  -- The source ack (rank 5). Null = flush: cursor and lease untouched.
  -- A join's source_acks name their own partitions: every cursor row locked
  -- up front in ascending order, then each ack as the element's own.
  if p_el ? 'source_acks' then
    perform queen.log_ack_lock_v1(v_group, array(
      select v_pid where v_ack is not null and jsonb_typeof(v_ack) = 'object'
      union select (a->>'partition_id')::uuid from jsonb_array_elements(p_el->'source_acks') a));
  end if;
  if v_ack is not null and jsonb_typeof(v_ack) = 'object' then
    v_ack_res := queen_streams.ack_source_v1(v_pid, v_group, v_ack, v_release);
  end if;
  if p_el ? 'source_acks' then
    select jsonb_agg(queen_streams.ack_source_v1((a->>'partition_id')::uuid, v_group, a, v_release)
             || jsonb_build_object('partition_id', (a->>'partition_id')::uuid::text,
                  'queueName', (select p.queue_name from queen.partitions p where p.id = (a->>'partition_id')::uuid))
             order by n)
      into v_source_res
      from jsonb_array_elements(p_el->'source_acks') with ordinality as t(a, n);
  end if;

  return jsonb_build_object('success', true, 'state_ops_applied', v_applied, 'state_results', v_state_res,
    'push_results', v_push_res, 'ack_result', v_ack_res)
    || case when v_source_res is null then '{}'::jsonb else jsonb_build_object('source_ack_results', v_source_res) end;
end
$$;
