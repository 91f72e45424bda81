-- One ack path (issue 14). The ack route (queen.log_ack_v1's one-move-per-
-- partition path and the item-by-item walk queen.log_ack_items_v1) and a
-- stream cycle's source ack (queen_streams.apply_element) each restated the
-- same three steps: cursor rows created and locked ascending, the fence
-- (cursor, lease, what the lease delivered), the cursor move. Each step is
-- now one function here, and all three callers go through them:
--   queen.log_ack_lock_v1   cursor rows created (existing partitions) and locked, ascending (rank 5)
--   queen.log_ack_fence_v1  the verdict on one item against its cursor row as found
--   queen.log_ack_move_v1   cursors moved to the highest acked offset per partition, set-based,
--                           ending leases as queen.log_ack_ends_lease_v1 says
-- Failure texts are no longer written here: SQL answers the catalogue code
-- (and structured fields); the broker words it from the one catalogue in
-- @queen-mq/protocol (errors.ts). The routes answer as before but for the
-- wording of a few failures, which is now the catalogue's.

-- Cursor rows of (p_group, each partition in p_pids) that exist as partitions:
-- missing ones inserted ascending (two requests creating the same rows in
-- opposite orders would wait on each other's insert), then all of them
-- locked ascending (PROTOCOL §4 rank 5).
create function queen.log_ack_lock_v1(p_group text, p_pids uuid[]) returns void
language plpgsql as $$
begin
  insert into queen.cursors (partition_id, consumer_group, cursor_offset)
  select p.id, p_group, queen.log_cursor_start_v1(p.id, p_group)
    from queen.partitions p
   where p.id = any(p_pids)
     and not exists (select 1 from queen.cursors c where c.partition_id = p.id and c.consumer_group = p_group)
   order by p.id
  on conflict do nothing;
  perform 1 from queen.cursors c
   where c.consumer_group = p_group and c.partition_id = any(p_pids)
   order by c.partition_id, c.consumer_group for update;
end
$$;

-- The fence of one ack item (PROTOCOL §5.5 steps 2–3, §7.4): null when the
-- item may move the cursor, else the catalogue code. A live lease is the one
-- the item names, unexpired; the item must lie within what it delivered.
-- `p_lease_first`: a stream cycle is fenced by its lease before anything
-- else (a replayed cycle whose lease is gone is LEASE_EXPIRED even when its
-- message is acked, SEED "Why it is exactly-once"); the ack route answers an
-- acked message alreadyAcked first, whatever lease it names (a consumer's
-- retried ack is not an error). One SQL expression, inlined where it is
-- called from a set-based statement.
create function queen.log_ack_fence_v1(
  p_offset bigint, p_lease uuid, p_cursor bigint, p_cur_lease uuid, p_cur_expires timestamptz, p_cur_last bigint, p_lease_first boolean
) returns text
language sql stable parallel safe as $$
  select case
    when p_lease is not null and p_lease_first
         and (p_cur_lease is distinct from p_lease or not coalesce(p_cur_expires > now(), false)) then 'LEASE_EXPIRED'
    when p_offset <= p_cursor then 'ALREADY_ACKED'
    when p_lease is not null
         and (p_cur_lease is distinct from p_lease or not coalesce(p_cur_expires > now(), false)) then 'LEASE_EXPIRED'
    when p_lease is not null and p_offset > p_cur_last then 'MESSAGE_NOT_LEASED'
  end
$$;

-- Whether a cursor move to p_offset ends the lease: when `p_release` is
-- null, once the cursor reaches what the lease delivered (the ack route);
-- true always (a cycle's default, a dead-letter); false never (a gate's
-- partial ack keeps its lease running). Inlined where it is used.
create function queen.log_ack_ends_lease_v1(p_release boolean, p_cursor bigint, p_lease_last bigint, p_offset bigint) returns boolean
language sql immutable parallel safe as $$
  select coalesce(p_release, p_lease_last is not null and greatest(p_cursor, p_offset) >= p_lease_last)
$$;

-- Moves each partition's cursor (never back) to the highest offset given for
-- it, discards the failure records it passed, and ends the lease as
-- log_ack_ends_lease_v1 says. Cursor rows must be locked (log_ack_lock_v1).
create function queen.log_ack_move_v1(p_group text, p_pids uuid[], p_offsets bigint[], p_release boolean default null) returns void
language plpgsql as $$
begin
  if cardinality(p_pids) = 1 then
    -- One partition (a cycle's source ack, each step of the walk): the
    -- statements on its key alone cost about half the array form's (measured).
    update queen.cursors c
       set cursor_offset = greatest(c.cursor_offset, p_offsets[1]),
           last_acked_at = now(),
           lease_id          = case when queen.log_ack_ends_lease_v1(p_release, c.cursor_offset, c.lease_last_offset, p_offsets[1]) then null else c.lease_id end,
           lease_expires_at  = case when queen.log_ack_ends_lease_v1(p_release, c.cursor_offset, c.lease_last_offset, p_offsets[1]) then null else c.lease_expires_at end,
           lease_last_offset = case when queen.log_ack_ends_lease_v1(p_release, c.cursor_offset, c.lease_last_offset, p_offsets[1]) then null else c.lease_last_offset end
     where c.partition_id = p_pids[1] and c.consumer_group = p_group;
    delete from queen.failures f
     where f.partition_id = p_pids[1] and f.consumer_group = p_group and f.msg_offset <= p_offsets[1];
    return;
  end if;
  update queen.cursors c
     set cursor_offset = greatest(c.cursor_offset, m.last),
         last_acked_at = now(),
         lease_id          = case when queen.log_ack_ends_lease_v1(p_release, c.cursor_offset, c.lease_last_offset, m.last) then null else c.lease_id end,
         lease_expires_at  = case when queen.log_ack_ends_lease_v1(p_release, c.cursor_offset, c.lease_last_offset, m.last) then null else c.lease_expires_at end,
         lease_last_offset = case when queen.log_ack_ends_lease_v1(p_release, c.cursor_offset, c.lease_last_offset, m.last) then null else c.lease_last_offset end
    from (select i.pid, max(i.off) as last from unnest(p_pids, p_offsets) as i(pid, off) group by i.pid) m
   where c.partition_id = m.pid and c.consumer_group = p_group;
  delete from queen.failures f
   using (select i.pid, max(i.off) as last from unnest(p_pids, p_offsets) as i(pid, off) group by i.pid) m
   where f.partition_id = m.pid and f.consumer_group = p_group and f.msg_offset <= m.last;
end
$$;

-- 002's single move, kept for its callers (an autoAck pop), now the same
-- move. Answers true when a lease existed and this move ended it.
create or replace function queen.log_move_cursor_v1(p_partition_id uuid, p_group text, p_offset bigint) returns boolean
language plpgsql as $$
declare
  v_released boolean;
begin
  select c.lease_id is not null and queen.log_ack_ends_lease_v1(null, c.cursor_offset, c.lease_last_offset, p_offset) into v_released
    from queen.cursors c where c.partition_id = p_partition_id and c.consumer_group = p_group;
  perform queen.log_ack_move_v1(p_group, array[p_partition_id], array[p_offset]);
  return coalesce(v_released, false);
end
$$;

-- The item-by-item walk (002), through the shared lock, fence and move, for
-- the requests the one-move path does not take: failed, retry and dlq items,
-- unknown messages, repeats, and items the lease does not cover. Items are
-- applied per partition in ascending offset order; results come back by idx,
-- failures as {code, error:null} (the broker words them).
create or replace function queen.log_ack_items_v1(p_group text, p_items jsonb) returns jsonb
language plpgsql as $$
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

-- Ack (PROTOCOL §5.5), as 006: the common request (every item completed, for
-- a retained message past the cursor, inside the live lease it names) is one
-- cursor move per partition; anything else is the walk above. The lock, the
-- fence and the move are the walk's own.
create or replace function queen.log_ack_v1(p_group text, p_items jsonb) returns jsonb
language plpgsql as $$
declare
  v_txid  text[];
  v_pid   uuid[];
  v_lease uuid[];
  v_off   bigint[];
  v_given bigint[];
  v_found boolean;
  v_pids  uuid[];
  v_plain boolean;
  v_fast  boolean;
  v_map   jsonb;
  v_out   jsonb;
begin
  select array_agg(e->>'transactionId' order by n), array_agg((e->>'partitionId')::uuid order by n),
         array_agg((e->>'leaseId')::uuid order by n), array_agg((e->>'offset')::bigint order by n),
         bool_and(coalesce(e->>'status', 'completed') in ('completed', 'success'))
    into v_txid, v_pid, v_lease, v_given, v_plain
    from jsonb_array_elements(p_items) with ordinality as t(e, n);
  if not coalesce(v_plain, false) then
    return queen.log_ack_items_v1(p_group, p_items);
  end if;
  -- Which messages, when every item names its offset (our client sends what
  -- the pop answered): one primary-key probe per item, kept only where the
  -- message there has the item's transactionId, which decides. About half
  -- the cost of reading the lease's range into a map (measured, batch 100).
  if array_position(v_given, null) is null then
    select array_agg(m.msg_offset order by i.n), bool_and(m.msg_offset is not null)
      into v_off, v_found
      from unnest(v_pid, v_txid, v_given) with ordinality as i(pid, txid, off, n)
      left join queen.messages m
        on m.partition_id = i.pid and m.msg_offset = i.off and coalesce(m.transaction_id, m.id::text) = i.txid;
  end if;
  if not coalesce(v_found, false) then
    -- Otherwise (or an offset named another message): a consumer acks what
    -- its lease delivered, so each leased partition's range (cursor,
    -- lease_last] is read once into a map from wire transactionId to offset,
    -- and the items are looked up in it, instead of two index probes per item. A map, not a join: the planner sizes unnested
    -- arrays at a handful of rows, and a 10,000-item ack planned as a nested
    -- loop took 30 s. Anything not found that way (no leaseId, a lease gone,
    -- an id spelled otherwise) is resolved one by one, as the walk would.
    select jsonb_object_agg(r.partition_id::text, r.offsets)
      into v_map
      from (select c.partition_id,
                   (select jsonb_object_agg(coalesce(m.transaction_id, m.id::text), m.msg_offset)
                      from queen.messages m
                     where m.partition_id = c.partition_id
                       and m.msg_offset > c.cursor_offset and m.msg_offset <= c.lease_last_offset) as offsets
              from queen.cursors c
             where c.consumer_group = p_group
               and (c.partition_id, c.lease_id) in (select distinct l.pid, l.lease from unnest(v_pid, v_lease) as l(pid, lease) where l.lease is not null)) r
     where r.offsets is not null;
    select array_agg((v_map->(i.pid::text)->>i.txid)::bigint order by i.n), bool_and(v_map->(i.pid::text)->>i.txid is not null)
      into v_off, v_plain
      from unnest(v_pid, v_txid) with ordinality as i(pid, txid, n);
    if not coalesce(v_plain, false) then
      select array_agg(o.msg_offset order by o.ord), bool_and(o.msg_offset is not null)
        into v_off, v_plain
        from queen.message_offsets_v1(v_pid, v_txid) o;
      if not v_plain then
        return queen.log_ack_items_v1(p_group, p_items);
      end if;
    end if;
  end if;

  select array_agg(distinct x order by x) into v_pids from unnest(v_pid) x;
  perform queen.log_ack_lock_v1(p_group, v_pids);

  -- Every item passes the fence as the request found the cursor rows, and no
  -- item repeats another: else the walk decides item by item.
  select count(*) = cardinality(v_pid)
         and count(distinct (i.pid, i.off)) = count(*)
         and coalesce(bool_and(queen.log_ack_fence_v1(i.off, i.lease, c.cursor_offset, c.lease_id, c.lease_expires_at, c.lease_last_offset, false) is null), false)
    into v_fast
    from unnest(v_pid, v_off, v_lease) as i(pid, off, lease)
    join queen.cursors c on c.partition_id = i.pid and c.consumer_group = p_group;
  if not v_fast then
    return queen.log_ack_items_v1(p_group, p_items);
  end if;

  -- The answer, compact: every item succeeded, so what differs per item is
  -- its offset and whether its cursor move ended the lease (the item reaching
  -- the lease's last offset, as in the walk); the broker expands it into the
  -- per-item results (ack.ts). Read from the cursor rows as found.
  select jsonb_build_object(
           'offsets', to_jsonb(array_agg(r.off::text order by r.n)),
           'released', to_jsonb(array_agg(coalesce(r.released, false) order by r.n)),
           'names', (select jsonb_object_agg(p.id, jsonb_build_array(p.queue_name, p.name)) from queen.partitions p where p.id = any(v_pids)))
    into v_out
    from (select i.n, i.off,
                 c.lease_id is not null and c.lease_last_offset is not null
                 and i.off = min(i.off) filter (where i.off >= c.lease_last_offset) over (partition by i.pid) as released
            from unnest(v_pid, v_off) with ordinality as i(pid, off, n)
            join queen.cursors c on c.partition_id = i.pid and c.consumer_group = p_group) r;

  perform queen.log_ack_move_v1(p_group, v_pid, v_off);
  return v_out;
end
$$;

-- A failed cycle element, by catalogue code only: the broker words it
-- (errors.ts). p_extra: fields the answer carries besides {code}.
create function queen_streams.fail_v2(p_code text, p_extra jsonb default '{}'::jsonb) returns void
language plpgsql as $$
begin
  raise exception using errcode = 'QS001', message = p_code, detail = '', hint = p_extra::text;
end
$$;

-- 003's form, still called by queen_streams.apply_state_ops_v1 (006): its
-- text is dropped, so every element failure is answered by code alone.
create or replace function queen_streams.fail(p_code text, p_error text, p_extra jsonb default '{}'::jsonb) returns void
language plpgsql as $$
begin
  perform queen_streams.fail_v2(p_code, p_extra);
end
$$;

-- A cycle's push_results (PROTOCOL §7.4, the push result of §5.3) from the
-- allocator's compact answer ({status, message_id, offset} arrays, item
-- order) and the items' own fields: the SQL form of the broker's one
-- shaper, pushResultOf (push-results.ts), which a test holds it equal to.
create function queen_streams.push_results_v1(p_answer jsonb, p_pids uuid[], p_queues text[], p_txids text[], p_traces jsonb[])
returns jsonb
language sql immutable as $$
  select coalesce(jsonb_agg(jsonb_build_object(
           'index', s.n - 1, 'transaction_id', coalesce(p_txids[s.n], s.message_id), 'status', s.status,
           'message_id', s.message_id, 'partition_id', p_pids[s.n], 'queueName', p_queues[s.n], 'offset', s.off)
         || case when s.status = 'queued' then jsonb_build_object('trace_id', coalesce(p_traces[s.n], 'null'::jsonb)) else '{}'::jsonb end
         order by s.n), '[]'::jsonb)
    from jsonb_array_elements_text(p_answer->'status') with ordinality as st(status, n)
    join lateral (select st.n, st.status, p_answer->'message_id'->>(st.n::int - 1) as message_id,
                         p_answer->'offset'->>(st.n::int - 1) as off) s on true
$$;

-- A raw caller's sink pushes ({queue, partition?} or {partition_id}, as
-- 006): partitions resolved (they must exist), then the broker's own path,
-- queen_streams.push_sink_runs_v1, and the one shaper above.
create or replace function queen_streams.push_sink_items_v1(p_items jsonb, p_producer_sub text) returns jsonb
language plpgsql as $$
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

-- One cycle element, as 006, its source ack through the ack route's own
-- lock, fence and move. Same locks in the same order, same answer.
create or replace function queen_streams.apply_element(p_el jsonb) returns jsonb
language plpgsql as $$
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
begin
  -- Rank 3: the query row first (a drop or reset holding it FOR UPDATE makes
  -- us wait, then find it gone), then the (query, partition) shard lock, so a
  -- flush and a cycle of one shard serialise before either writes.
  perform 1 from queen_streams.queries q where q.query_id = v_qid for key share;
  if not found then
    perform queen_streams.fail_v2('QUERY_NOT_FOUND');
  end if;
  perform pg_advisory_xact_lock(hashtextextended(v_qid::text || ':' || v_pid::text, 0));

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

-- PROTOCOL §8, as 003, with `error` null when the failure carries no text
-- (the broker words every failure from the catalogue).
create or replace function queen.log_streams_cycle_v1(p_elements jsonb) returns jsonb
language plpgsql as $$
declare
  v_el      jsonb;
  v_out     jsonb := '[]'::jsonb;
  v_res     jsonb;
  v_base    jsonb;
  v_code    text;
  v_error   text;
  v_extra   text;
begin
  perform 1 from queen_streams.queries q
   where q.query_id in (select (e->>'query_id')::uuid from jsonb_array_elements(p_elements) e)
   order by q.query_id for key share;
  perform pg_advisory_xact_lock(h)
    from (select distinct hashtextextended((e->>'query_id')::uuid::text || ':' || (e->>'partition_id')::uuid::text, 0) as h
            from jsonb_array_elements(p_elements) e
           order by 1) s;

  for v_el in select e from jsonb_array_elements(p_elements) with ordinality as t(e, n) order by n loop
    v_base := jsonb_build_object(
      'query_id', (v_el->>'query_id')::uuid::text, 'partition_id', (v_el->>'partition_id')::uuid::text,
      'queueName', (select p.queue_name from queen.partitions p where p.id = (v_el->>'partition_id')::uuid));
    begin
      v_res := v_base || queen_streams.apply_element(v_el);
    exception when sqlstate 'QS001' then
      get stacked diagnostics v_code = message_text, v_error = pg_exception_detail, v_extra = pg_exception_hint;
      v_res := v_base || jsonb_build_object('success', false, 'state_ops_applied', 0, 'state_results', '[]'::jsonb,
        'push_results', '[]'::jsonb, 'ack_result', null, 'error', nullif(v_error, ''), 'code', v_code)
        || coalesce(nullif(v_extra, '')::jsonb, '{}'::jsonb);
    end;
    v_out := v_out || jsonb_build_array(jsonb_build_object('idx', v_el->'idx', 'result', v_res));
  end loop;
  return v_out;
end
$$;

-- Lease extend (PROTOCOL §5.6), as 002, answering codes only.
create or replace function queen.log_extend_lease_v1(p_lease_id uuid, p_seconds int) returns jsonb
language plpgsql as $$
declare
  v_live    int;
  v_expires timestamptz;
begin
  perform 1 from queen.cursors c where c.lease_id = p_lease_id
   order by c.partition_id, c.consumer_group for update;
  if not found then
    return jsonb_build_object('success', false, 'code', 'LEASE_NOT_FOUND');
  end if;
  with upd as (
    update queen.cursors c
       set lease_expires_at = greatest(c.lease_expires_at, now() + make_interval(secs => p_seconds))
     where c.lease_id = p_lease_id and c.lease_expires_at > now()
    returning c.lease_expires_at)
  select count(*), min(lease_expires_at) into v_live, v_expires from upd;
  if v_live = 0 then
    return jsonb_build_object('success', false, 'code', 'LEASE_EXPIRED');
  end if;
  return jsonb_build_object('success', true, 'expiresAt', queen.iso(v_expires));
end
$$;
