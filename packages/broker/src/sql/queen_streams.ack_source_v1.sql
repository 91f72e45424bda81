-- One source ack of a cycle element (PROTOCOL §7.4) through the ack route's
-- own lock, fence and move: the element's `ack` on its partition, and each of
-- a join's `source_acks` on the partition it names. The caller holds the
-- cursor rows' locks already when it acks more than one partition (rank 5,
-- ascending, taken up front); taking one again here is a no-op.
-- A failure raises QS001 (the element's savepoint undoes everything).
create or replace function queen_streams.ack_source_v1(p_pid uuid, p_group text, p_ack jsonb, p_release boolean) returns jsonb
language plpgsql set enable_seqscan = off as $$
declare
  v_status     text := coalesce(p_ack->>'status', 'completed');
  v_lease      uuid := (p_ack->>'leaseId')::uuid;
  v_msg_offset bigint;
  v_cur        queen.cursors%rowtype;
  v_fence      text;
  v_k          bigint;
  v_count      int;
  v_release    boolean := p_release;
begin
  v_msg_offset := queen.message_offset_v1(p_pid, p_ack->>'transactionId');
  if v_msg_offset is null then
    perform queen_streams.fail_v2('MESSAGE_NOT_FOUND');
  end if;

  perform queen.log_ack_lock_v1(p_group, array[p_pid]);
  select * into v_cur from queen.cursors c where c.partition_id = p_pid and c.consumer_group = p_group;
  -- Fencing, lease first: a retried or zombie cycle whose lease is gone
  -- rolls back with its sink pushes (SEED "Why it is exactly-once").
  v_fence := queen.log_ack_fence_v1(v_msg_offset, v_lease, v_cur.cursor_offset, v_cur.lease_id, v_cur.lease_expires_at, v_cur.lease_last_offset, true);
  if v_fence is not null then
    perform queen_streams.fail_v2(v_fence);
  end if;
  if p_ack ? 'count' and p_ack->'count' <> 'null'::jsonb then
    v_k := (p_ack->>'count')::bigint;
    if queen.log_advance_v1(p_pid, v_cur.cursor_offset, v_k) is distinct from v_msg_offset then
      perform queen_streams.fail_v2('ACK_COUNT_MISMATCH');
    end if;
  end if;

  -- Retained messages this ack covers: the walk from the cursor, never cursor + K.
  select count(*) into v_count from queen.messages m
   where m.partition_id = p_pid and m.msg_offset > v_cur.cursor_offset and m.msg_offset <= v_msg_offset;

  if v_status in ('failed', 'dlq') then
    -- Cycle acks dead-letter immediately (compat), and the lease ends.
    perform queen.log_dead_letter_v1(p_pid, p_group, v_msg_offset, coalesce(p_ack->>'error', 'Dead-lettered by stream cycle'),
      coalesce((select f.retry_count from queen.failures f where f.partition_id = p_pid and f.consumer_group = p_group
                 and f.msg_offset = v_msg_offset), 0));
    v_release := true;
  end if;

  -- The lease ends only when the cycle says so: release_lease:false is a
  -- gate's partial ack, and the lease must run on (its expiry returns the
  -- denied tail), even when the cursor reaches what the lease delivered.
  perform queen.log_ack_move_v1(p_group, array[p_pid], array[v_msg_offset], v_release);

  -- lease_released tells the broker the partition is poppable again: it
  -- wakes long-polls on every replica after commit (no NOTIFY in here).
  return jsonb_build_object('success', true, 'count', v_count, 'lease_released', v_release and v_cur.lease_id is not null,
    'dlq', v_status in ('failed', 'dlq'), 'offset', v_msg_offset::text);
end
$$;
