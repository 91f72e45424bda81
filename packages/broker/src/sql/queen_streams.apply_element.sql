-- One cycle element, as 006, its source ack through the ack route's own
-- lock, fence and move. Same locks in the same order, same answer.
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
  v_msg_offset bigint;
  v_cur        queen.cursors%rowtype;
  v_fence      text;
  v_k          bigint;
  v_count      int;
  v_release    boolean := coalesce((p_el->>'release_lease')::boolean, true);
  v_status     text;
  v_lease      uuid;
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
  -- then each target partition's run through the one allocator.
  if p_el ? 'sink_items' then
    v_push_res := queen_streams.push_sink_runs_v1(p_el->'sink_items', v_sub);
  else
    v_push_res := queen_streams.push_sink_items_v1(coalesce(p_el->'push_items', '[]'::jsonb), v_sub);
  end if;

  -- The source ack (rank 5). Null = flush: cursor and lease untouched.
  if v_ack is not null and jsonb_typeof(v_ack) = 'object' then
    v_status := coalesce(v_ack->>'status', 'completed');
    v_lease := (v_ack->>'leaseId')::uuid;
    v_msg_offset := queen.message_offset_v1(v_pid, v_ack->>'transactionId');
    if v_msg_offset is null then
      perform queen_streams.fail_v2('MESSAGE_NOT_FOUND');
    end if;

    perform queen.log_ack_lock_v1(v_group, array[v_pid]);
    select * into v_cur from queen.cursors c where c.partition_id = v_pid and c.consumer_group = v_group;
    -- Fencing, lease first: a retried or zombie cycle whose lease is gone
    -- rolls back with its sink pushes (SEED "Why it is exactly-once").
    v_fence := queen.log_ack_fence_v1(v_msg_offset, v_lease, v_cur.cursor_offset, v_cur.lease_id, v_cur.lease_expires_at, v_cur.lease_last_offset, true);
    if v_fence is not null then
      perform queen_streams.fail_v2(v_fence);
    end if;
    if v_ack ? 'count' and v_ack->'count' <> 'null'::jsonb then
      v_k := (v_ack->>'count')::bigint;
      if queen.log_advance_v1(v_pid, v_cur.cursor_offset, v_k) is distinct from v_msg_offset then
        perform queen_streams.fail_v2('ACK_COUNT_MISMATCH');
      end if;
    end if;

    -- Retained messages this ack covers: the walk from the cursor, never cursor + K.
    select count(*) into v_count from queen.messages m
     where m.partition_id = v_pid and m.msg_offset > v_cur.cursor_offset and m.msg_offset <= v_msg_offset;

    if v_status in ('failed', 'dlq') then
      -- Cycle acks dead-letter immediately (compat), and the lease ends.
      perform queen.log_dead_letter_v1(v_pid, v_group, v_msg_offset, coalesce(v_ack->>'error', 'Dead-lettered by stream cycle'),
        coalesce((select f.retry_count from queen.failures f where f.partition_id = v_pid and f.consumer_group = v_group
                   and f.msg_offset = v_msg_offset), 0));
      v_release := true;
    end if;

    -- The lease ends only when the cycle says so: release_lease:false is a
    -- gate's partial ack, and the lease must run on (its expiry returns the
    -- denied tail), even when the cursor reaches what the lease delivered.
    perform queen.log_ack_move_v1(v_group, array[v_pid], array[v_msg_offset], v_release);

    -- lease_released tells the broker the partition is poppable again: it
    -- wakes long-polls on every replica after commit (no NOTIFY in here).
    v_ack_res := jsonb_build_object('success', true, 'count', v_count, 'lease_released', v_release and v_cur.lease_id is not null,
      'dlq', v_status in ('failed', 'dlq'), 'offset', v_msg_offset::text);
  end if;

  return jsonb_build_object('success', true, 'state_ops_applied', v_applied, 'state_results', v_state_res,
    'push_results', v_push_res, 'ack_result', v_ack_res);
end
$$;
