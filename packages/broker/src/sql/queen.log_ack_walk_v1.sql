-- The ack item by item: every request queen.log_ack_completed_v1 declines
-- (failed, retry and dlq items, unknown messages, repeats, items the lease
-- does not cover), through the same lock, fence and move as every ack path.
-- Items are applied per partition in ascending offset order; the answer
-- holds the results by idx, failures as {code, error: null} (the broker
-- words them from the catalogue). A failed or retry item ends its
-- partition's lease and stops the partition for the rest of the request
-- (ACK_BLOCKED), so nothing is acked past a message that will come back.
create or replace function queen.log_ack_walk_v1(p_group text, p_items jsonb) returns jsonb
language plpgsql set enable_seqscan = off as $$
declare
  -- Results by idx in a plpgsql array (assigned in place), JSON once at the
  -- end: growing a jsonb value per item copies it each time (quadratic).
  v_results       jsonb[];
  v_item          record;
  v_cur           queen.cursors%rowtype;
  v_stopped       uuid[] := '{}';
  v_ended         jsonb := '{}'::jsonb;  -- pid -> {lease, last}: leases this request ended by failed/retry
  v_item_pids     uuid[];
  v_item_txids    text[];
  v_item_offsets  bigint[];
  v_fence         text;
  v_ended_last    bigint;
  v_head          bigint;
  v_count         int;
  v_limit         int;
  v_item_released boolean;
  v_dlq           boolean;
  v_res           jsonb;
  v_retry_at      timestamptz;  -- a failed item's retry delay ends then (null: none)
begin
  v_results := array_fill(null::jsonb, array[jsonb_array_length(p_items)], array[0]);
  -- Each item's message resolved once (two index lookups, queen.message_offsets_v1).
  select array_agg((e->>'partitionId')::uuid order by n), array_agg(e->>'transactionId' order by n)
    into v_item_pids, v_item_txids
    from jsonb_array_elements(p_items) with ordinality as t(e, n);
  select array_agg(o.msg_offset order by o.ord) into v_item_offsets from queen.message_offsets_v1(v_item_pids, v_item_txids) o;
  perform queen.log_ack_lock_v1(p_group, array(select distinct x.pid from unnest(v_item_pids, v_item_offsets) as x(pid, off) where x.off is not null));

  for v_item in
    select (e->>'idx')::int as idx, e->>'transactionId' as txid, (e->>'partitionId')::uuid as pid,
           coalesce(e->>'status', 'completed') as status, (e->>'leaseId')::uuid as lease_id, e->>'error' as error,
           v_item_offsets[n] as msg_offset, p.name as partition_name, p.queue_name, q.options
      from jsonb_array_elements(p_items) with ordinality as t(e, n)
      left join queen.partitions p on p.id = (e->>'partitionId')::uuid and v_item_offsets[n] is not null
      left join queen.queues q on q.id = p.queue_id
     order by p.id nulls first, v_item_offsets[n], (e->>'idx')::int
  loop
    v_res := jsonb_build_object('index', v_item.idx, 'transactionId', v_item.txid, 'success', false, 'error', null,
      'code', null, 'queueName', v_item.queue_name, 'partitionName', v_item.partition_name, 'leaseReleased', false,
      'dlq', false, 'offset', v_item.msg_offset::text, 'alreadyAcked', false);

    if v_item.msg_offset is null then
      v_results[v_item.idx] := v_res || '{"code":"MESSAGE_NOT_FOUND"}'::jsonb;
      continue;
    end if;

    select * into v_cur from queen.cursors c where c.partition_id = v_item.pid and c.consumer_group = p_group;
    -- Fenced against the lease as the request found it: a failed/retry item
    -- earlier in this request ending the lease must not turn the later items
    -- of that lease into LEASE_EXPIRED (they are charged or ACK_BLOCKED).
    v_ended_last := case when (v_ended->(v_item.pid::text)->>'lease')::uuid = v_item.lease_id
                         then (v_ended->(v_item.pid::text)->>'last')::bigint end;
    if v_ended_last is not null
       and queen.log_ack_fence_v1(v_item.msg_offset, v_item.lease_id, v_cur.cursor_offset, v_cur.lease_id, v_cur.lease_expires_at, v_cur.lease_last_offset, false) = 'LEASE_EXPIRED' then
      v_fence := queen.log_ack_fence_v1(v_item.msg_offset, v_item.lease_id, v_cur.cursor_offset, v_item.lease_id, 'infinity', v_ended_last, false);
    else
      v_fence := queen.log_ack_fence_v1(v_item.msg_offset, v_item.lease_id, v_cur.cursor_offset, v_cur.lease_id, v_cur.lease_expires_at, v_cur.lease_last_offset, false);
    end if;
    if v_fence = 'ALREADY_ACKED' then
      v_results[v_item.idx] := v_res || '{"success":true,"alreadyAcked":true}'::jsonb;
      continue;
    elsif v_fence is not null then
      v_results[v_item.idx] := v_res || jsonb_build_object('code', v_fence);
      continue;
    end if;

    v_limit := queen.queue_option_int(v_item.options, 'retryLimit', 3);
    v_item_released := false;
    v_dlq := false;

    if v_item.pid = any(v_stopped) then
      if v_item.status in ('completed', 'success', 'dlq') then
        v_results[v_item.idx] := v_res || '{"code":"ACK_BLOCKED"}'::jsonb;
        continue;
      elsif v_item.status = 'failed' then
        perform queen.log_charge_failure_v1(v_item.pid, p_group, v_item.msg_offset);
      end if;
    elsif v_item.status in ('completed', 'success') then
      v_item_released := v_cur.lease_id is not null and queen.log_ack_ends_lease_v1(null, v_cur.cursor_offset, v_cur.lease_last_offset, v_item.msg_offset);
      perform queen.log_ack_move_v1(p_group, array[v_item.pid], array[v_item.msg_offset]);
    elsif v_item.status = 'dlq' then
      v_count := coalesce((select f.retry_count from queen.failures f where f.partition_id = v_item.pid
                            and f.consumer_group = p_group and f.msg_offset = v_item.msg_offset), 0);
      perform queen.log_dead_letter_v1(v_item.pid, p_group, v_item.msg_offset, v_item.error, v_count);
      v_item_released := v_cur.lease_id is not null and queen.log_ack_ends_lease_v1(null, v_cur.cursor_offset, v_cur.lease_last_offset, v_item.msg_offset);
      perform queen.log_ack_move_v1(p_group, array[v_item.pid], array[v_item.msg_offset]);
      v_dlq := true;
    elsif v_item.status = 'failed' then
      v_count := queen.log_charge_failure_v1(v_item.pid, p_group, v_item.msg_offset);
      v_head := queen.log_advance_v1(v_item.pid, v_cur.cursor_offset, 1);
      if v_head = v_item.msg_offset and v_count > v_limit then
        perform queen.log_dead_letter_v1(v_item.pid, p_group, v_item.msg_offset, coalesce(v_item.error, 'Retries exhausted'), v_count);
        -- A dead letter ends the lease too, as a failed item below the limit
        -- does (PROTOCOL: the lease ends on a failed or retry ack), so the
        -- messages after it are poppable at once; the items after this one in
        -- the request still apply, fenced by the lease as found.
        v_item_released := v_cur.lease_id is not null;
        perform queen.log_ack_move_v1(p_group, array[v_item.pid], array[v_item.msg_offset], true);
        if v_item_released then
          v_ended := v_ended || jsonb_build_object(v_item.pid::text, jsonb_build_object('lease', v_cur.lease_id, 'last', v_cur.lease_last_offset));
        end if;
        v_dlq := true;
      else
        perform queen.log_release_lease_v1(v_item.pid, p_group);
        -- The partition waits for the queue's retry delay, if it sets one:
        -- the pop skips it for this group until retry_at.
        v_retry_at := now() + make_interval(secs => queen.retry_delay_ms_v1(v_item.options, v_count) / 1000);
        if v_retry_at > now() then
          update queen.cursors c set retry_at = v_retry_at where c.partition_id = v_item.pid and c.consumer_group = p_group;
        else
          v_retry_at := null;
        end if;
        v_item_released := v_cur.lease_id is not null;
        if v_item_released then
          v_ended := v_ended || jsonb_build_object(v_item.pid::text, jsonb_build_object('lease', v_cur.lease_id, 'last', v_cur.lease_last_offset));
        end if;
        v_stopped := v_stopped || v_item.pid;
      end if;
    else -- retry
      perform queen.log_release_lease_v1(v_item.pid, p_group);
      v_item_released := v_cur.lease_id is not null;
      if v_item_released then
        v_ended := v_ended || jsonb_build_object(v_item.pid::text, jsonb_build_object('lease', v_cur.lease_id, 'last', v_cur.lease_last_offset));
      end if;
      v_stopped := v_stopped || v_item.pid;
    end if;

    v_results[v_item.idx] := v_res || jsonb_build_object('success', true, 'leaseReleased', v_item_released, 'dlq', v_dlq);
    if v_retry_at is not null then
      v_results[v_item.idx] := v_results[v_item.idx] || jsonb_build_object('retryAt', queen.iso(v_retry_at));
      v_retry_at := null;
    end if;
  end loop;
  return to_jsonb(v_results);
end
$$;
