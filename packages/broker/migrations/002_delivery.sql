-- Delivery: pop under leases, acks, lease extension. Each is one function so
-- a request is one round trip; none of them writes a message row.

create function queen.queue_option_int(p_options jsonb, p_name text, p_default int) returns int
language sql immutable as $$
  select coalesce((p_options->>p_name)::int, p_default)
$$;

-- Charges one failed delivery to (message, group) and answers the new count.
create function queen.log_charge_failure_v1(p_partition_id uuid, p_group text, p_offset bigint) returns int
language sql as $$
  insert into queen.failures as f (partition_id, consumer_group, msg_offset, retry_count)
  values (p_partition_id, p_group, p_offset, 1)
  on conflict (partition_id, consumer_group, msg_offset) do update set retry_count = f.retry_count + 1
  returning retry_count
$$;

-- Moves a cursor forward (never back), discards failure records it passed and
-- ends the lease once the cursor reaches what the lease delivered.
-- Answers true when the lease ended here.
create function queen.log_move_cursor_v1(p_partition_id uuid, p_group text, p_offset bigint) returns boolean
language plpgsql as $$
declare
  v_had_lease boolean;
  v_released  boolean;
begin
  -- "Released" means a lease existed and ended here, not merely that none is held.
  select c.lease_id is not null into v_had_lease
    from queen.cursors c where c.partition_id = p_partition_id and c.consumer_group = p_group;
  update queen.cursors c
     set cursor_offset = greatest(c.cursor_offset, p_offset),
         last_acked_at = now(),
         lease_id          = case when c.lease_last_offset is not null and greatest(c.cursor_offset, p_offset) >= c.lease_last_offset then null else c.lease_id end,
         lease_expires_at  = case when c.lease_last_offset is not null and greatest(c.cursor_offset, p_offset) >= c.lease_last_offset then null else c.lease_expires_at end,
         lease_last_offset = case when c.lease_last_offset is not null and greatest(c.cursor_offset, p_offset) >= c.lease_last_offset then null else c.lease_last_offset end
   where c.partition_id = p_partition_id and c.consumer_group = p_group
  returning c.lease_id is null into v_released;
  delete from queen.failures
   where partition_id = p_partition_id and consumer_group = p_group and msg_offset <= p_offset;
  return coalesce(v_had_lease and v_released, false);
end
$$;

create function queen.log_release_lease_v1(p_partition_id uuid, p_group text) returns void
language sql as $$
  update queen.cursors set lease_id = null, lease_expires_at = null, lease_last_offset = null
   where partition_id = p_partition_id and consumer_group = p_group
$$;

create function queen.log_dead_letter_v1(p_partition_id uuid, p_group text, p_offset bigint, p_error text, p_retry_count int) returns void
language sql as $$
  insert into queen.dlq (partition_id, consumer_group, msg_offset, error_message, retry_count)
  values (p_partition_id, p_group, p_offset, p_error, p_retry_count)
  on conflict (partition_id, consumer_group, msg_offset) do nothing
$$;

-- Pop (PROTOCOL §5.4), with a count of the expired leases the call found
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

  -- Missing cursor rows first, ascending, before any cursor is claimed: an
  -- insert that waits on another transaction's uncommitted insert of the
  -- same row while this one holds claimed cursors could deadlock with an
  -- ack that creates cursors and then locks them ascending (PROTOCOL §4).
  insert into queen.cursors (partition_id, consumer_group, cursor_offset)
  select p.id, p_group, queen.log_cursor_start_v1(p.id, p_group)
    from queen.partitions p
   where p.queue_id = p_queue_id
     and (p_partition_id is null or p.id = p_partition_id)
     and p.head_offset > 0
     and not exists (select 1 from queen.cursors c where c.partition_id = p.id and c.consumer_group = p_group)
   order by p.id
  on conflict do nothing;

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
      select m.partition_id, v_cand.name, m.msg_offset, m.id, coalesce(m.transaction_id, m.id::text), m.trace_id, m.payload, m.encrypted,
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
create function queen.log_pop_v1(
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

-- Ack (PROTOCOL §5.5). items: [{idx, transactionId, partitionId, status, leaseId?, error?}].
-- Items are applied per (partition, group) in ascending offset order after the
-- cursor rows are locked in ascending order; results come back by idx.
create function queen.log_ack_v1(p_group text, p_items jsonb) returns jsonb
language plpgsql as $$
declare
  -- Results by idx in a plpgsql array (assigned in place), JSON once at the
  -- end: growing a jsonb value per item copies it each time (quadratic).
  v_results   jsonb[];
  v_item      record;
  v_cur       queen.cursors%rowtype;
  v_stopped   uuid[] := '{}';
  v_ended     jsonb := '{}'::jsonb;  -- pid -> {lease, last}: leases this request ended by failed/retry
  v_lease_ok  boolean;
  v_lease_last bigint;
  v_head      bigint;
  v_count     int;
  v_limit     int;
  v_released  boolean;
  v_dlq       boolean;
  v_res       jsonb;
begin
  v_results := array_fill(null::jsonb, array[jsonb_array_length(p_items)], array[0]);
  -- Missing cursor rows first (inserted ascending too: two requests creating
  -- the same rows in opposite orders would wait on each other's insert), then
  -- every cursor row locked ascending (rank 5).
  insert into queen.cursors (partition_id, consumer_group, cursor_offset)
  select p.id, p_group, queen.log_cursor_start_v1(p.id, p_group)
    from queen.partitions p
   where p.id in (select (e->>'partitionId')::uuid from jsonb_array_elements(p_items) e
                   where queen.message_offset_v1((e->>'partitionId')::uuid, e->>'transactionId') is not null)
   order by p.id
  on conflict do nothing;
  perform 1 from queen.cursors c
   where c.consumer_group = p_group
     and c.partition_id in (select (e->>'partitionId')::uuid from jsonb_array_elements(p_items) e)
   order by c.partition_id, c.consumer_group for update;

  for v_item in
    select (e->>'idx')::int as idx, e->>'transactionId' as txid, (e->>'partitionId')::uuid as pid,
           coalesce(e->>'status', 'completed') as status, (e->>'leaseId')::uuid as lease_id, e->>'error' as error,
           m.msg_offset, p.name as partition_name, p.queue_name, q.options
      from jsonb_array_elements(p_items) e
      cross join lateral (select queen.message_offset_v1((e->>'partitionId')::uuid, e->>'transactionId') as msg_offset) m
      left join queen.partitions p on p.id = (e->>'partitionId')::uuid and m.msg_offset is not null
      left join queen.queues q on q.id = p.queue_id
     order by p.id nulls first, m.msg_offset, (e->>'idx')::int
  loop
    v_res := jsonb_build_object('index', v_item.idx, 'transactionId', v_item.txid, 'success', false, 'error', null,
      'code', null, 'queueName', v_item.queue_name, 'partitionName', v_item.partition_name, 'leaseReleased', false,
      'dlq', false, 'offset', v_item.msg_offset::text, 'alreadyAcked', false);

    if v_item.msg_offset is null then
      v_results[v_item.idx] := v_res || '{"error":"Message not found","code":"MESSAGE_NOT_FOUND"}'::jsonb;
      continue;
    end if;

    select * into v_cur from queen.cursors c where c.partition_id = v_item.pid and c.consumer_group = p_group;

    if v_item.msg_offset <= v_cur.cursor_offset then
      v_results[v_item.idx] := v_res || '{"success":true,"alreadyAcked":true}'::jsonb;
      continue;
    end if;

    if v_item.lease_id is not null then
      -- Fenced against the lease as the request found it: a failed/retry item
      -- earlier in this request ending the lease must not turn the later items
      -- of that lease into LEASE_EXPIRED (they are charged or ACK_BLOCKED).
      v_lease_ok := v_cur.lease_id = v_item.lease_id and v_cur.lease_expires_at > now();
      v_lease_last := v_cur.lease_last_offset;
      if not coalesce(v_lease_ok, false) and (v_ended->(v_item.pid::text)->>'lease')::uuid = v_item.lease_id then
        v_lease_ok := true;
        v_lease_last := (v_ended->(v_item.pid::text)->>'last')::bigint;
      end if;
      if not coalesce(v_lease_ok, false) then
        v_results[v_item.idx] := v_res || '{"error":"Invalid or expired lease","code":"LEASE_EXPIRED"}'::jsonb;
        continue;
      end if;
      if v_item.msg_offset > v_lease_last then
        v_results[v_item.idx] := v_res || '{"error":"Message is beyond what this lease delivered","code":"MESSAGE_NOT_LEASED"}'::jsonb;
        continue;
      end if;
    end if;

    v_limit := queen.queue_option_int(v_item.options, 'retryLimit', 3);
    v_released := false;
    v_dlq := false;

    if v_item.pid = any(v_stopped) then
      if v_item.status in ('completed', 'success', 'dlq') then
        v_results[v_item.idx] := v_res || jsonb_build_object(
          'error', 'An earlier failed or retry item of this partition stopped this ack; the message will be redelivered',
          'code', 'ACK_BLOCKED');
        continue;
      elsif v_item.status = 'failed' then
        perform queen.log_charge_failure_v1(v_item.pid, p_group, v_item.msg_offset);
      end if;
    elsif v_item.status in ('completed', 'success') then
      v_released := queen.log_move_cursor_v1(v_item.pid, p_group, v_item.msg_offset);
    elsif v_item.status = 'dlq' then
      v_count := coalesce((select f.retry_count from queen.failures f where f.partition_id = v_item.pid
                            and f.consumer_group = p_group and f.msg_offset = v_item.msg_offset), 0);
      perform queen.log_dead_letter_v1(v_item.pid, p_group, v_item.msg_offset, v_item.error, v_count);
      v_released := queen.log_move_cursor_v1(v_item.pid, p_group, v_item.msg_offset);
      v_dlq := true;
    elsif v_item.status = 'failed' then
      v_count := queen.log_charge_failure_v1(v_item.pid, p_group, v_item.msg_offset);
      v_head := queen.log_advance_v1(v_item.pid, v_cur.cursor_offset, 1);
      if v_head = v_item.msg_offset and v_count > v_limit then
        perform queen.log_dead_letter_v1(v_item.pid, p_group, v_item.msg_offset, coalesce(v_item.error, 'Retries exhausted'), v_count);
        v_released := queen.log_move_cursor_v1(v_item.pid, p_group, v_item.msg_offset);
        v_dlq := true;
      else
        perform queen.log_release_lease_v1(v_item.pid, p_group);
        v_released := v_cur.lease_id is not null;
        if v_released then
          v_ended := v_ended || jsonb_build_object(v_item.pid::text, jsonb_build_object('lease', v_cur.lease_id, 'last', v_cur.lease_last_offset));
        end if;
        v_stopped := v_stopped || v_item.pid;
      end if;
    else -- retry
      perform queen.log_release_lease_v1(v_item.pid, p_group);
      v_released := v_cur.lease_id is not null;
      if v_released then
        v_ended := v_ended || jsonb_build_object(v_item.pid::text, jsonb_build_object('lease', v_cur.lease_id, 'last', v_cur.lease_last_offset));
      end if;
      v_stopped := v_stopped || v_item.pid;
    end if;

    v_results[v_item.idx] := v_res || jsonb_build_object('success', true, 'leaseReleased', v_released, 'dlq', v_dlq);
  end loop;

  return to_jsonb(v_results);
end
$$;

-- Lease extend (PROTOCOL §5.6): every cursor row holding that live lease.
create function queen.log_extend_lease_v1(p_lease_id uuid, p_seconds int) returns jsonb
language plpgsql as $$
declare
  v_live    int;
  v_expires timestamptz;
begin
  perform 1 from queen.cursors c where c.lease_id = p_lease_id
   order by c.partition_id, c.consumer_group for update;
  if not found then
    return jsonb_build_object('success', false, 'code', 'LEASE_NOT_FOUND', 'error', 'Lease not found');
  end if;
  with upd as (
    update queen.cursors c
       set lease_expires_at = greatest(c.lease_expires_at, now() + make_interval(secs => p_seconds))
     where c.lease_id = p_lease_id and c.lease_expires_at > now()
    returning c.lease_expires_at)
  select count(*), min(lease_expires_at) into v_live, v_expires from upd;
  if v_live = 0 then
    return jsonb_build_object('success', false, 'code', 'LEASE_EXPIRED', 'error', 'Lease already expired');
  end if;
  return jsonb_build_object('success', true, 'expiresAt', queen.iso(v_expires));
end
$$;
