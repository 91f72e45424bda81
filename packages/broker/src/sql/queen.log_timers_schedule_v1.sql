-- Schedules timers inside the caller's transaction. p_timers: [{queue,
-- partition, payload, fireAt (ISO) | delayMs, transactionId?}].
-- Rows are inserted in ascending (queue, partition, transactionId) order with
-- ids generated in that same order (rank 2 ascending timer id), so two
-- transactions scheduling overlapping transactionIds wait on each other in one
-- direction only. Answers [{timerId, fireAt, status}] in request order.
create or replace function queen.log_timers_schedule_v1(p_timers jsonb, p_producer_sub text) returns jsonb
language plpgsql set enable_seqscan = off as $$
declare
  v_out  jsonb[] := array_fill(null::jsonb, array[jsonb_array_length(p_timers)]);
  v_t    record;
  v_seq  bigint := 0;
  v_id   uuid;
  v_fire timestamptz;
  v_dup  jsonb;
  v_now  timestamptz := clock_timestamp();
  v_enc  bytea;
begin
  for v_t in
    select e, ord::int as ord from jsonb_array_elements(p_timers) with ordinality as x(e, ord)
     order by (e->>'queue') collate "C", (e->>'partition') collate "C", (e->>'transactionId') collate "C" nulls last, ord
  loop
    v_seq := v_seq + 1;
    v_enc := case when v_t.e ? 'encrypted' then decode(v_t.e->>'encrypted', 'base64') end;
    v_id := queen.uuid_v7(v_now, v_seq);
    -- delayMs counts on the database clock, the one the firer compares with.
    v_fire := case when v_t.e ? 'delayMs' then v_now + (v_t.e->>'delayMs')::bigint * interval '1 millisecond'
                   else (v_t.e->>'fireAt')::timestamptz end;
    if v_t.e->>'transactionId' is null then
      insert into queen.log_timers (id, queue_name, partition_name, payload, encrypted, transaction_id, producer_sub, fire_at)
      values (v_id, v_t.e->>'queue', v_t.e->>'partition', v_t.e->'payload', v_enc, null, p_producer_sub, v_fire);
      v_out[v_t.ord] := jsonb_build_object('timerId', v_id, 'fireAt', queen.iso(v_fire), 'status', 'scheduled');
    else
      insert into queen.log_timers (id, queue_name, partition_name, payload, encrypted, transaction_id, producer_sub, fire_at)
      values (v_id, v_t.e->>'queue', v_t.e->>'partition', v_t.e->'payload', v_enc, v_t.e->>'transactionId', p_producer_sub, v_fire)
      on conflict (queue_name, partition_name, transaction_id) where transaction_id is not null do nothing;
      if found then
        v_out[v_t.ord] := jsonb_build_object('timerId', v_id, 'fireAt', queen.iso(v_fire), 'status', 'scheduled');
      else
        select jsonb_build_object('timerId', t.id, 'fireAt', queen.iso(t.fire_at), 'status', 'duplicate') into v_dup
          from queen.log_timers t
         where t.queue_name = v_t.e->>'queue' and t.partition_name = v_t.e->>'partition'
           and t.transaction_id = v_t.e->>'transactionId';
        v_out[v_t.ord] := v_dup;
        if v_dup is null then
          -- The pending twin fired and was deleted between our conflict check
          -- and this read: schedule anew (the fire's dedup covers the message).
          insert into queen.log_timers (id, queue_name, partition_name, payload, encrypted, transaction_id, producer_sub, fire_at)
          values (v_id, v_t.e->>'queue', v_t.e->>'partition', v_t.e->'payload', v_enc, v_t.e->>'transactionId', p_producer_sub, v_fire);
          v_out[v_t.ord] := jsonb_build_object('timerId', v_id, 'fireAt', queen.iso(v_fire), 'status', 'scheduled');
        end if;
      end if;
    end if;
  end loop;
  return to_jsonb(v_out);
end
$$;
