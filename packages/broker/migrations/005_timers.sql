-- Timers (PROTOCOL §6): a message scheduled for later, written by the
-- transaction route (committed with it, gone with a rollback) and pushed
-- exactly once when due by the firer every replica runs. Firing claims due
-- rows FOR UPDATE SKIP LOCKED, so replicas share the work and never fire one
-- timer twice; the push and the delete commit together, so a crash before
-- commit leaves the timer due.
-- Lock order (PROTOCOL §4): timer rows are rank 2, after KV (rank 1) and
-- before partition append locks (rank 4).

create table queen.log_timers (
  id              uuid primary key,            -- UUIDv7
  queue_name      text not null,
  partition_name  text not null,
  payload         jsonb,
  transaction_id  text,                        -- null: the message gets 'timer:<id>'
  producer_sub    text,                        -- the scheduling request's subject
  fire_at         timestamptz not null,
  created_at      timestamptz not null default now(),
  encrypted       bytea                        -- ciphertext for an encrypted target queue (payload null)
);
create index log_timers_due on queen.log_timers (fire_at, id);
-- A pending timer with a transactionId is unique per (queue, partition, transactionId).
create unique index log_timers_pending_txid on queen.log_timers (queue_name, partition_name, transaction_id)
  where transaction_id is not null;
create index log_timers_queue on queen.log_timers (queue_name);

-- Schedules timers inside the caller's transaction. p_timers: [{queue,
-- partition, payload, fireAt (ISO) | delayMs, transactionId?}].
-- Rows are inserted in ascending (queue, partition, transactionId) order with
-- ids generated in that same order (rank 2 ascending timer id), so two
-- transactions scheduling overlapping transactionIds wait on each other in one
-- direction only. Answers [{timerId, fireAt, status}] in request order.
create or replace function queen.log_timers_schedule_v1(p_timers jsonb, p_producer_sub text) returns jsonb
language plpgsql as $$
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

-- Fires up to p_limit due timers in one transaction: claims them (SKIP
-- LOCKED, ascending fire_at then id), takes the append locks of their target
-- partitions ascending (rank 4), pushes each through the allocator
-- (transactionId = the timer's, else 'timer:<id>'; dedup applies) and deletes
-- it. Target partitions are created beforehand by the caller in their own
-- short transaction; a timer whose partition does not exist (yet, or any
-- more) is left due and counted in `missing`, for the caller to create and
-- retry. Answers {fired, missing, queues}.
create or replace function queen.log_timers_fire_v1(p_limit int) returns jsonb
language plpgsql as $$
declare
  v_ids     uuid[];
  v_locked  uuid[];
  v_t       record;
  v_fired   int := 0;
  v_missing int := 0;
  v_queues  text[] := '{}';
begin
  select coalesce(array_agg(s.id order by s.fire_at, s.id), '{}') into v_ids
    from (select t.id, t.fire_at from queen.log_timers t
           where t.fire_at <= clock_timestamp()
           order by t.fire_at, t.id
           limit p_limit
             for update skip locked) s;
  if cardinality(v_ids) = 0 then
    return jsonb_build_object('fired', 0, 'missing', 0, 'queues', '[]'::jsonb);
  end if;

  -- Rank 4: every target's append lock, ascending id, before the first push.
  select coalesce(array_agg(s.id), '{}') into v_locked
    from (select p.id from queen.partitions p
           where p.id in (select p2.id from queen.log_timers t
                            join queen.queues q on q.name = t.queue_name
                            join queen.partitions p2 on p2.queue_id = q.id and p2.name = t.partition_name
                           where t.id = any(v_ids))
           order by p.id
             for update) s;

  for v_t in
    select t.id, t.queue_name, t.payload, t.encrypted, t.transaction_id, t.producer_sub, p.id as partition_id
      from queen.log_timers t
      left join (queen.queues q join queen.partitions p on p.queue_id = q.id)
        on q.name = t.queue_name and p.name = t.partition_name
     where t.id = any(v_ids)
     order by t.fire_at, t.id
  loop
    if v_t.partition_id is null or not (v_t.partition_id = any(v_locked)) then
      v_missing := v_missing + 1;
      continue;
    end if;
    perform queen.log_push_one_v1(v_t.partition_id, v_t.payload, coalesce(v_t.transaction_id, 'timer:' || v_t.id::text),
                                  null, v_t.producer_sub, v_t.encrypted is not null, v_t.encrypted);
    delete from queen.log_timers where id = v_t.id;
    v_fired := v_fired + 1;
    if not (v_t.queue_name = any(v_queues)) then v_queues := array_append(v_queues, v_t.queue_name); end if;
  end loop;
  return jsonb_build_object('fired', v_fired, 'missing', v_missing, 'queues', to_jsonb(v_queues));
end
$$;

-- Queue delete (PROTOCOL §5.2), pending timers included. The timers
-- targeting the queue are locked FIRST (rank 2, ascending id) and only those
-- are deleted: a firer holding one of them goes on to its partition lock
-- (rank 4) without meeting us, and a timer scheduled after we started is
-- ordered after the delete (it fires into a re-created queue, like a push
-- would). Partitions are then locked ascending, so a push in flight either
-- commits before (and is deleted) or finds its partition gone and re-creates
-- the queue. Answers whether the queue existed.
create function queen.log_delete_queue_v1(p_queue text) returns boolean
language plpgsql as $$
declare
  v_queue  uuid;
  v_parts  uuid[];
  v_timers uuid[];
begin
  select coalesce(array_agg(s.id), '{}') into v_timers
    from (select t.id from queen.log_timers t where t.queue_name = p_queue order by t.id for update) s;
  delete from queen.log_timers where id = any(v_timers);

  select id into v_queue from queen.queues where name = p_queue for update;
  if not found then return false; end if;

  select coalesce(array_agg(s.id), '{}') into v_parts
    from (select p.id from queen.partitions p where p.queue_id = v_queue order by p.id for update) s;

  perform 1 from queen.cursors c where c.partition_id = any(v_parts)
   order by c.partition_id, c.consumer_group for update;

  delete from queen.messages where partition_id = any(v_parts);
  delete from queen.log_segments where partition_id = any(v_parts);
  delete from queen.failures where partition_id = any(v_parts);
  delete from queen.dlq where partition_id = any(v_parts);
  delete from queen.cursors where partition_id = any(v_parts);
  delete from queen.subscriptions where queue_id = v_queue;
  delete from queen.partitions where queue_id = v_queue;
  delete from queen.queues where id = v_queue;
  return true;
end
$$;
