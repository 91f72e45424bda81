-- Retry backoff applied (issue 32): a queue that sets `retryDelay` (ms) keeps
-- a failed message from its consumer group for that long; without it a
-- failed message is redelivered at once, as before.
--
-- Queen v1 stores retry_delay and never reads it. We apply it to an ack with
-- status 'failed' that leaves the message for redelivery (below retryLimit).
-- Not to a 'retry' ack (a consumer handing its lease back uncharged) and not
-- to an expired lease (its messages already waited leaseTime); a dead letter
-- moves on at once as before.
--
-- Order per partition is kept: the failed message is the cursor's next one,
-- so while its delay runs the whole partition is held back for that group
-- (queen.cursors.retry_at, like a lease nobody holds), and the failed message
-- is the first one redelivered when it passes. Other partitions and other
-- groups are not affected.
--
-- The delay of the n-th failure of the head message (retry_count n):
--   fixed (default)   retryDelay, exactly;
--   exponential       retryDelay * 2^(n-1), plus a jitter of up to a quarter
--                     of that on top (the delay is never shorter than
--                     nominal, and each step stays longer than the previous
--                     one), all bounded by retryDelayMax.
-- retryDelayMax (ms, 0: no bound but 2^31-1) bounds either mode.
--
-- Cost for queues without retryDelay: the pop's and the wake hints' scans
-- compare one more column of the cursor row they already read; the failed
-- ack reads the option it already has in hand. No statement is added.

alter table queen.cursors add column retry_at timestamptz;

-- Stored options hold every option with its default filled in, so until now
-- every configured queue held retryDelay 1000, never applied. retryDelay is
-- applied only when set explicitly (configure no longer fills it in): the
-- stored default is dropped so that existing queues keep redelivering at
-- once. A queue that had set exactly 1000 sets it again to have it applied.
update queen.queues set options = options - 'retryDelay' where options->>'retryDelay' = '1000';

-- The delay (ms) before the group may see a message again after its
-- p_count-th failure; 0 when the queue sets no retryDelay.
create function queen.retry_delay_ms_v1(p_options jsonb, p_count int) returns double precision
language sql volatile as $$
  select case
    when coalesce((p_options->>'retryDelay')::bigint, 0) <= 0 then 0
    when p_options->>'retryBackoff' = 'exponential' then
      least((p_options->>'retryDelay')::bigint * power(2::double precision, least(greatest(p_count, 1) - 1, 40)) * (1 + random() / 4), b.bound)
    else least((p_options->>'retryDelay')::bigint, b.bound)
  end
  from (select coalesce(nullif((p_options->>'retryDelayMax')::bigint, 0), 2147483647)::double precision as bound) b
$$;

-- Whether a pop of p_group on the queue (or on its one partition) could
-- claim something now: as in 017_wake_hints.sql, and not while a retry delay
-- holds the partition.
create or replace function queen.log_claimable_any_v1(p_queue_id uuid, p_partition_id uuid, p_group text) returns boolean
language sql volatile
set enable_seqscan = off
as $$
  select exists (
    select 1
      from queen.partitions p
      left join queen.cursors c on c.partition_id = p.id and c.consumer_group = p_group
     where p.queue_id = p_queue_id
       and (p_partition_id is null or p.id = p_partition_id)
       and p.head_offset > greatest(coalesce(c.cursor_offset, 0), p.first_offset - 1)
       and (c.lease_id is null or c.lease_expires_at <= now())
       and (c.retry_at is null or c.retry_at <= now()))
$$;

-- Which of p_partition_ids a pop of p_group could claim now (017), retry delays too.
create or replace function queen.log_claimable_of_v1(p_partition_ids uuid[], p_group text) returns uuid[]
language sql volatile
set enable_seqscan = off
as $$
  select coalesce(array_agg(p.id), '{}')
    from queen.partitions p
    left join queen.cursors c on c.partition_id = p.id and c.consumer_group = p_group
   where p.id = any(p_partition_ids)
     and p.head_offset > greatest(coalesce(c.cursor_offset, 0), p.first_offset - 1)
     and (c.lease_id is null or c.lease_expires_at <= now())
     and (c.retry_at is null or c.retry_at <= now())
$$;

-- log_pop_v3 as in 020_scale_plans.sql, but a partition whose retry delay
-- runs for the group is no candidate (the scans and the check after the lock).
create or replace function queen.log_pop_v3(
  p_queue_id uuid, p_partition_id uuid, p_group text, p_batch int, p_max_partitions int,
  p_auto_ack boolean, p_lease_id uuid, p_sub_mode text default 'all', p_sub_start timestamptz default null,
  p_max_bytes bigint default null
) returns table (
  partition_id uuid, partition_name text, msg_offset bigint, id uuid, transaction_id text, trace_id uuid,
  payload jsonb, encrypted bytea, producer_sub text, created_at text, retry_count int, lease_expired int
)
language plpgsql
set enable_seqscan = off
as $$
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
  v_cands       refcursor;
  v_cur         queen.cursors%rowtype;
  v_from        bigint;
  v_head_msg    bigint;
  v_count       int;
  v_last        bigint;
  v_charged     int;
  v_expired     int := 0;
  v_bytes_left  bigint := p_max_bytes;
  v_bytes       bigint;
  v_compressed  boolean;
  v_envelope    int;
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
  -- What one message costs in the answer besides its payload: the fields of
  -- PoppedMessage (ids, times, offsets: under 320 bytes) and the names it repeats.
  v_envelope    := 384 + octet_length(p_group) + (select octet_length(q.name) from queen.queues q where q.id = p_queue_id);

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
  -- A pop of one partition and a pop of the queue are separate statements,
  -- each planned for its own key: `p_partition_id is null or p.id = ...`
  -- cannot use the primary key in a cached plan, and made a pop of one
  -- partition read every partition of its queue.
  if p_partition_id is not null then
    insert into queen.cursors (partition_id, consumer_group, cursor_offset)
    select p.id, p_group, queen.log_cursor_start_v1(p.id, p_group)
      from queen.partitions p
     where p.id = p_partition_id and p.queue_id = p_queue_id
       and p.head_offset > 0
       and not exists (select 1 from queen.cursors c where c.partition_id = p.id and c.consumer_group = p_group offset 0)
    on conflict do nothing;
  else
    insert into queen.cursors (partition_id, consumer_group, cursor_offset)
    select p.id, p_group, queen.log_cursor_start_v1(p.id, p_group)
      from queen.partitions p
     where p.queue_id = p_queue_id
       and p.head_offset > 0
       and not exists (select 1 from queen.cursors c where c.partition_id = p.id and c.consumer_group = p_group offset 0)
     order by p.id
    on conflict do nothing;
  end if;

  if p_partition_id is not null then
    open v_cands for
      select p.id, p.name, p.first_offset
        from queen.partitions p
        left join queen.cursors c on c.partition_id = p.id and c.consumer_group = p_group
       where p.id = p_partition_id and p.queue_id = p_queue_id
         and p.head_offset > greatest(coalesce(c.cursor_offset, 0), p.first_offset - 1)
         and (c.lease_id is null or c.lease_expires_at <= now())
         and (c.retry_at is null or c.retry_at <= now())
         and (v_buffer_s = 0 or p.last_created_at <= now() - make_interval(secs => v_buffer_s));
  else
    open v_cands for
      select p.id, p.name, p.first_offset
        from queen.partitions p
        left join queen.cursors c on c.partition_id = p.id and c.consumer_group = p_group
       where p.queue_id = p_queue_id
         and p.head_offset > greatest(coalesce(c.cursor_offset, 0), p.first_offset - 1)
         and (c.lease_id is null or c.lease_expires_at <= now())
         and (c.retry_at is null or c.retry_at <= now())
         and (v_buffer_s = 0 or p.last_created_at <= now() - make_interval(secs => v_buffer_s))
       order by (select m.created_at from queen.messages m
                  where m.partition_id = p.id
                    and m.msg_offset > greatest(coalesce(c.cursor_offset, 0), p.first_offset - 1)
                  order by m.msg_offset limit 1) nulls last, p.id;
  end if;
  loop
    fetch v_cands into v_cand;
    exit when not found;
    exit when v_remaining <= 0 or v_claimed >= p_max_partitions or v_bytes_left <= 0;

    select * into v_cur from queen.cursors c
     where c.partition_id = v_cand.id and c.consumer_group = p_group
       for update skip locked;
    continue when not found;
    continue when v_cur.lease_id is not null and v_cur.lease_expires_at > now();
    continue when v_cur.retry_at > now();

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
    if p_max_bytes is null then
      select count(*), max(s.msg_offset) into v_count, v_last from (
        select m.msg_offset from queen.messages m
         where m.partition_id = v_cand.id and m.msg_offset > v_from
           and (v_delay_s = 0 or m.created_at <= now() - make_interval(secs => v_delay_s))
         order by m.msg_offset limit v_remaining) s;
    else
      -- QUEEN_MAX_POP_BYTES: claim (and so lease) only the prefix whose
      -- answer fits what is left of the budget; the very first message of a
      -- pop always goes, so a message larger than the bound still moves.
      -- First a cheap upper bound that reads no payload: an uncompressed
      -- jsonb's text is at most 6 times its stored size (\u escapes are the
      -- worst case). Only when that does not fit, or a payload is
      -- compressed, is each payload's text length computed.
      select count(*), max(s.msg_offset), coalesce(sum(s.est), 0), coalesce(bool_or(s.compressed), false)
        into v_count, v_last, v_bytes, v_compressed from (
        select m.msg_offset,
               6 * coalesce(pg_column_size(m.payload), 4) + coalesce(octet_length(m.encrypted), 0)
                 + octet_length(v_cand.name) + coalesce(octet_length(m.transaction_id), 36) + coalesce(octet_length(m.producer_sub), 4) + v_envelope as est,
               pg_column_compression(m.payload) is not null as compressed
          from queen.messages m
         where m.partition_id = v_cand.id and m.msg_offset > v_from
           and (v_delay_s = 0 or m.created_at <= now() - make_interval(secs => v_delay_s))
         order by m.msg_offset limit v_remaining) s;
      if v_compressed or v_bytes > v_bytes_left then
      select count(*), max(s.msg_offset), coalesce(max(s.cum), 0) into v_count, v_last, v_bytes from (
        select m.msg_offset,
               sum(coalesce(octet_length(m.payload::text), 4) + coalesce(octet_length(m.encrypted), 0)
                   + octet_length(v_cand.name) + coalesce(octet_length(m.transaction_id), 36) + coalesce(octet_length(m.producer_sub), 4) + v_envelope)
                 over (order by m.msg_offset rows between unbounded preceding and current row) as cum,
               row_number() over (order by m.msg_offset) as rn
          from (select * from queen.messages m
                 where m.partition_id = v_cand.id and m.msg_offset > v_from
                   and (v_delay_s = 0 or m.created_at <= now() - make_interval(secs => v_delay_s))
                 order by m.msg_offset limit v_remaining) m) s
       where s.cum <= v_bytes_left or (s.rn = 1 and v_claimed = 0);
      end if;
    end if;
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
    if p_max_bytes is not null then v_bytes_left := v_bytes_left - v_bytes; end if;
  end loop;
  close v_cands;
  -- The count of expired leases this call released, on one trailing row
  -- with no message, so the caller counts them without another round trip.
  if v_expired > 0 then
    return query select null::uuid, null::text, null::bigint, null::uuid, null::text, null::uuid,
                        null::jsonb, null::bytea, null::text, null::text, null::int, v_expired;
  end if;
end
$$;

-- log_ack_items_v1 as in 008_one_ack_path.sql (with 020's setting), but a
-- failed item left for redelivery holds its partition back for the group
-- for the queue's retry delay, and its result says until when (retryAt).
create or replace function queen.log_ack_items_v1(p_group text, p_items jsonb) returns jsonb
language plpgsql
set enable_seqscan = off
as $$
declare
  -- Results by idx in a plpgsql array (assigned in place), JSON once at the
  -- end: growing a jsonb value per item copies it each time (quadratic).
  v_results    jsonb[];
  v_item       record;
  v_cur        queen.cursors%rowtype;
  v_stopped    uuid[] := '{}';
  v_ended      jsonb := '{}'::jsonb;  -- pid -> {lease, last}: leases this request ended by failed/retry
  v_pids       uuid[];
  v_txids      text[];
  v_offsets    bigint[];
  v_fence      text;
  v_ended_last bigint;
  v_head       bigint;
  v_count      int;
  v_limit      int;
  v_released   boolean;
  v_dlq        boolean;
  v_res        jsonb;
  v_delay_ms   double precision;
  v_retry_at   timestamptz;
begin
  v_results := array_fill(null::jsonb, array[jsonb_array_length(p_items)], array[0]);
  -- Each item's message resolved once (two index lookups, queen.message_offsets_v1).
  select array_agg((e->>'partitionId')::uuid order by n), array_agg(e->>'transactionId' order by n)
    into v_pids, v_txids
    from jsonb_array_elements(p_items) with ordinality as t(e, n);
  select array_agg(o.msg_offset order by o.ord) into v_offsets from queen.message_offsets_v1(v_pids, v_txids) o;
  perform queen.log_ack_lock_v1(p_group, array(select distinct x.pid from unnest(v_pids, v_offsets) as x(pid, off) where x.off is not null));

  for v_item in
    select (e->>'idx')::int as idx, e->>'transactionId' as txid, (e->>'partitionId')::uuid as pid,
           coalesce(e->>'status', 'completed') as status, (e->>'leaseId')::uuid as lease_id, e->>'error' as error,
           v_offsets[n] as msg_offset, p.name as partition_name, p.queue_name, q.options
      from jsonb_array_elements(p_items) with ordinality as t(e, n)
      left join queen.partitions p on p.id = (e->>'partitionId')::uuid and v_offsets[n] is not null
      left join queen.queues q on q.id = p.queue_id
     order by p.id nulls first, v_offsets[n], (e->>'idx')::int
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
    v_released := false;
    v_dlq := false;

    if v_item.pid = any(v_stopped) then
      if v_item.status in ('completed', 'success', 'dlq') then
        v_results[v_item.idx] := v_res || '{"code":"ACK_BLOCKED"}'::jsonb;
        continue;
      elsif v_item.status = 'failed' then
        perform queen.log_charge_failure_v1(v_item.pid, p_group, v_item.msg_offset);
      end if;
    elsif v_item.status in ('completed', 'success') then
      v_released := v_cur.lease_id is not null and queen.log_ack_ends_lease_v1(null, v_cur.cursor_offset, v_cur.lease_last_offset, v_item.msg_offset);
      perform queen.log_ack_move_v1(p_group, array[v_item.pid], array[v_item.msg_offset]);
    elsif v_item.status = 'dlq' then
      v_count := coalesce((select f.retry_count from queen.failures f where f.partition_id = v_item.pid
                            and f.consumer_group = p_group and f.msg_offset = v_item.msg_offset), 0);
      perform queen.log_dead_letter_v1(v_item.pid, p_group, v_item.msg_offset, v_item.error, v_count);
      v_released := v_cur.lease_id is not null and queen.log_ack_ends_lease_v1(null, v_cur.cursor_offset, v_cur.lease_last_offset, v_item.msg_offset);
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
        v_released := v_cur.lease_id is not null;
        perform queen.log_ack_move_v1(p_group, array[v_item.pid], array[v_item.msg_offset], true);
        if v_released then
          v_ended := v_ended || jsonb_build_object(v_item.pid::text, jsonb_build_object('lease', v_cur.lease_id, 'last', v_cur.lease_last_offset));
        end if;
        v_dlq := true;
      else
        perform queen.log_release_lease_v1(v_item.pid, p_group);
        -- The partition waits for the retry delay (none unless the queue sets retryDelay).
        v_delay_ms := queen.retry_delay_ms_v1(v_item.options, v_count);
        v_retry_at := null;
        if v_delay_ms > 0 then
          v_retry_at := now() + make_interval(secs => v_delay_ms / 1000);
          update queen.cursors c set retry_at = v_retry_at where c.partition_id = v_item.pid and c.consumer_group = p_group;
        end if;
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
    if v_retry_at is not null then
      v_results[v_item.idx] := v_results[v_item.idx] || jsonb_build_object('retryAt', queen.iso(v_retry_at));
      v_retry_at := null;
    end if;
  end loop;

  return to_jsonb(v_results);
end
$$;

-- Ack (PROTOCOL §5.5), as 006: the common request (every item completed, for
-- a retained message past the cursor, inside the live lease it names) is one
-- cursor move per partition; anything else is the walk above. The lock, the

-- log_seek_v1 as in 004_semantics.sql, but a seek, which ends the lease and
-- clears failure records, ends a running retry delay too.
create or replace function queen.log_seek_v1(
  p_group text, p_queue_id uuid, p_partition_id uuid, p_offset bigint, p_ts timestamptz
) returns table (partition_id uuid, cursor_offset bigint)
language plpgsql as $$
#variable_conflict use_column
begin
  insert into queen.cursors (partition_id, consumer_group, cursor_offset)
  select p.id, p_group, 0 from queen.partitions p
   where p.queue_id = p_queue_id and (p_partition_id is null or p.id = p_partition_id)
   order by p.id
  on conflict do nothing;

  perform 1 from queen.cursors c join queen.partitions p on p.id = c.partition_id
   where p.queue_id = p_queue_id and (p_partition_id is null or p.id = p_partition_id) and c.consumer_group = p_group
   order by c.partition_id for update of c;

  delete from queen.failures f using queen.partitions p
   where f.partition_id = p.id and p.queue_id = p_queue_id and (p_partition_id is null or p.id = p_partition_id)
     and f.consumer_group = p_group;

  return query
  update queen.cursors c
     set cursor_offset = case
           when p_offset is not null then least(p_offset, p.head_offset)
           when p_ts is not null then queen.log_offset_at_v1(p.id, p_ts)
           else p.head_offset end,
         lease_id = null, lease_expires_at = null, lease_last_offset = null, retry_at = null
    from queen.partitions p
   where p.id = c.partition_id and p.queue_id = p_queue_id and (p_partition_id is null or p.id = p_partition_id)
     and c.consumer_group = p_group
  returning c.partition_id, c.cursor_offset;
end
$$;
