-- Encryption at rest (PROTOCOL §5.1 encryptionEnabled) and the lease-expiry
-- count of pops. Payloads of encrypted queues are encrypted by the broker
-- (AES-256-GCM, the key never reaches the database); SQL only moves the
-- opaque bytes: messages.encrypted (payload null) as before, and now timers
-- too, which carry their ciphertext from scheduling to the fire.

alter table queen.log_timers add column encrypted bytea;

-- As in 005, plus `encrypted` (base64) per timer: stored as bytes, payload null.
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

-- As in 005, plus the timer's ciphertext passed through to the allocator.
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

-- Pop as log_pop_v1 (002), plus a count of the expired leases the call found
-- and released (queen_lease_expired_total): message rows carry 0 and, when
-- any lease expired, one trailing row with no message carries the count.
create function queen.log_pop_v2(
  p_queue_id uuid, p_partition_id uuid, p_group text, p_batch int, p_max_partitions int,
  p_auto_ack boolean, p_lease_id uuid, p_sub_mode text default 'all', p_sub_start timestamptz default null
) returns table (
  partition_id uuid, partition_name text, msg_offset bigint, id uuid, transaction_id text, trace_id uuid,
  payload jsonb, encrypted bytea, producer_sub text, created_at text, retry_count int, lease_expired int
)
language plpgsql as $$
#variable_conflict use_column
declare
  v_options     jsonb;
  v_lease_s     int;
  v_delay_s     int;
  v_buffer_s    int;
  v_retry_limit int;
  v_expiry_fail boolean;
  v_remaining   int := p_batch;
  v_claimed     int := 0;
  v_cand        record;
  v_cur         queen.cursors%rowtype;
  v_from        bigint;
  v_head_msg    bigint;
  v_count       int;
  v_last        bigint;
  v_charged     int;
  v_expired     int := 0;
begin
  -- A null queue (unknown queue or partition, or pops paused: see popOnce) claims nothing.
  if p_queue_id is null then return; end if;
  select q.options into v_options from queen.queues q where q.id = p_queue_id;
  v_lease_s     := queen.queue_option_int(v_options, 'leaseTime', 300);
  if v_lease_s = 0 then v_lease_s := 60; end if;
  v_delay_s     := queen.queue_option_int(v_options, 'delayedProcessing', 0);
  v_buffer_s    := queen.queue_option_int(v_options, 'windowBuffer', 0);
  v_retry_limit := queen.queue_option_int(v_options, 'retryLimit', 3);
  v_expiry_fail := coalesce((v_options->>'leaseExpiryCountsAsFailure')::boolean, false);

  -- A named group's start is fixed at its first pop on the queue (PROTOCOL §3.6).
  if p_group <> '__QUEUE_MODE__' then
    insert into queen.subscriptions (consumer_group, queue_id, mode, start_at)
    values (p_group, p_queue_id, coalesce(p_sub_mode, 'all'), p_sub_start)
    on conflict do nothing;
  end if;

  for v_cand in
    select p.id, p.name, p.first_offset
      from queen.partitions p
      left join queen.cursors c on c.partition_id = p.id and c.consumer_group = p_group
     where p.queue_id = p_queue_id
       and (p_partition_id is null or p.id = p_partition_id)
       and p.head_offset > greatest(coalesce(c.cursor_offset, 0), p.first_offset - 1)
       and (c.lease_id is null or c.lease_expires_at <= now())
       and (v_buffer_s = 0 or p.last_created_at <= now() - make_interval(secs => v_buffer_s))
     order by (select m.created_at from queen.messages m
                where m.partition_id = p.id
                  and m.msg_offset > greatest(coalesce(c.cursor_offset, 0), p.first_offset - 1)
                order by m.msg_offset limit 1) nulls last, p.id
  loop
    exit when v_remaining <= 0 or v_claimed >= p_max_partitions;

    insert into queen.cursors (partition_id, consumer_group, cursor_offset)
    values (v_cand.id, p_group, queen.log_cursor_start_v1(v_cand.id, p_group))
    on conflict do nothing;

    select * into v_cur from queen.cursors c
     where c.partition_id = v_cand.id and c.consumer_group = p_group
       for update skip locked;
    continue when not found;
    continue when v_cur.lease_id is not null and v_cur.lease_expires_at > now();

    if v_cur.lease_id is not null then
      -- Lazy expiry. By default an expired lease just returns its messages
      -- uncharged (that is how a stream gate defers); a queue may ask for the
      -- head message to be charged one failed delivery (PROTOCOL §3.5).
      v_head_msg := queen.log_advance_v1(v_cand.id, v_cur.cursor_offset, 1);
      if v_expiry_fail and v_head_msg is not null and v_head_msg <= v_cur.lease_last_offset then
        v_charged := queen.log_charge_failure_v1(v_cand.id, p_group, v_head_msg);
        if v_charged > v_retry_limit then
          perform queen.log_dead_letter_v1(v_cand.id, p_group, v_head_msg, 'Lease expired; retries exhausted', v_charged);
          update queen.cursors c set cursor_offset = v_head_msg where c.partition_id = v_cand.id and c.consumer_group = p_group;
          delete from queen.failures f where f.partition_id = v_cand.id and f.consumer_group = p_group and f.msg_offset <= v_head_msg;
          v_cur.cursor_offset := v_head_msg;
        end if;
      end if;
      perform queen.log_release_lease_v1(v_cand.id, p_group);
      perform pg_notify('queen_lease_expired', v_cand.id::text);
      v_expired := v_expired + 1;
    end if;

    v_from := greatest(v_cur.cursor_offset, v_cand.first_offset - 1);
    select count(*), max(s.msg_offset) into v_count, v_last from (
      select m.msg_offset from queen.messages m
       where m.partition_id = v_cand.id and m.msg_offset > v_from
         and (v_delay_s = 0 or m.created_at <= now() - make_interval(secs => v_delay_s))
       order by m.msg_offset limit v_remaining) s;
    continue when v_count = 0;

    if p_auto_ack then
      perform queen.log_move_cursor_v1(v_cand.id, p_group, v_last);
      update queen.cursors c set last_consumed_at = now() where c.partition_id = v_cand.id and c.consumer_group = p_group;
    else
      update queen.cursors c
         set lease_id = p_lease_id, lease_expires_at = now() + make_interval(secs => v_lease_s),
             lease_last_offset = v_last, last_consumed_at = now()
       where c.partition_id = v_cand.id and c.consumer_group = p_group;
    end if;

    return query
      select m.partition_id, v_cand.name, m.msg_offset, m.id, m.transaction_id, m.trace_id, m.payload, m.encrypted,
             m.producer_sub, queen.iso(m.created_at), coalesce(f.retry_count, 0), 0
        from queen.messages m
        left join queen.failures f on f.partition_id = m.partition_id and f.consumer_group = p_group and f.msg_offset = m.msg_offset
       where m.partition_id = v_cand.id and m.msg_offset > v_from and m.msg_offset <= v_last
       order by m.msg_offset;

    v_remaining := v_remaining - v_count;
    v_claimed   := v_claimed + 1;
  end loop;
  -- The count of expired leases this call released, on one trailing row
  -- with no message, so the caller counts them without another round trip.
  if v_expired > 0 then
    return query select null::uuid, null::text, null::bigint, null::uuid, null::text, null::uuid,
                        null::jsonb, null::bytea, null::text, null::text, null::int, v_expired;
  end if;
end
$$;

-- log_pop_v1 keeps its signature for raw callers (benches): message rows only.
create or replace function queen.log_pop_v1(
  p_queue_id uuid, p_partition_id uuid, p_group text, p_batch int, p_max_partitions int,
  p_auto_ack boolean, p_lease_id uuid, p_sub_mode text default 'all', p_sub_start timestamptz default null
) returns table (
  partition_id uuid, partition_name text, msg_offset bigint, id uuid, transaction_id text, trace_id uuid,
  payload jsonb, encrypted bytea, producer_sub text, created_at text, retry_count int
)
language sql as $$
  select r.partition_id, r.partition_name, r.msg_offset, r.id, r.transaction_id, r.trace_id,
         r.payload, r.encrypted, r.producer_sub, r.created_at, r.retry_count
    from queen.log_pop_v2(p_queue_id, p_partition_id, p_group, p_batch, p_max_partitions,
                          p_auto_ack, p_lease_id, p_sub_mode, p_sub_start) r
   where r.msg_offset is not null
$$;
