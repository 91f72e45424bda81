-- The ack: one function for every ack request, falling through inside SQL
-- from the cheapest check that can decide to the item-by-item walk, so a
-- request costs one statement whatever it holds (issue 30: the run check,
-- its fallback and the walk were three functions, and a run the first one
-- declined went back to the broker and came again as jsonb).
--
-- 1. A pop's run (p_offsets and p_txids given, p_items null): what a
--    consumer sends after a pop: one partition, one lease (or none), every
--    item completed, with the offset the pop answered, taken as arrays
--    instead of jsonb (issue 12: reading 100 items out of jsonb cost about
--    0.8 ms of PostgreSQL against 0.3 ms for the wire floor's claim and
--    release). Its checks are the walk's, item for item, stated over the
--    whole run:
--      * every offset holds the message the item names (its transactionId,
--        or the message id when it had none): one index range scan of the
--        run's offsets, read into an array by position;
--      * no offset repeats;
--      * the cursor row exists and is locked;
--      * queen.log_ack_fence_v1 passes for every item: every offset is past
--        the cursor and, with a lease, the cursor holds that lease, it has
--        not expired and it reaches the highest offset.
--    When all hold, the cursor moves through queen.log_ack_move_v1 (the one
--    move of every ack path) and the row says which offset ended the lease
--    (the first to reach the lease's last offset, as in the walk) and the
--    names, r_answer null. When any fails, nothing has been written, and the
--    run goes on to 2 as the jsonb items the broker would have sent.
-- 2. Every item completed (p_items): one cursor move per partition. Measured
--    on a batch of 100 items from one pop (issue 12): 2.9 ms instead of 3.7
--    for the walk's form. The items are read by one jsonb_to_recordset; the
--    items of one pop are checked against one index range scan of their
--    range, others by one primary-key probe each, or a map of the leased
--    range; one partition is fenced and answered from its cursor row read
--    once, several in one pass over the items joined to their cursor rows.
--    r_answer is the compact {offsets, released, names} that the broker
--    expands (ack.ts). Anything off this path goes on to 3.
-- 3. The walk: failed, retry and dlq items, unknown messages, repeats, and
--    items the lease does not cover, through the shared lock, fence and
--    move. Items are applied per partition in ascending offset order;
--    r_answer holds the results by idx, failures as {code, error:null}
--    (the broker words them).
-- p_walk takes every request straight to 3: the tests compare the paths.
create or replace function queen.log_ack_v2(p_group text, p_items jsonb, p_partition_id uuid, p_lease uuid, p_offsets bigint[], p_txids text[], p_walk boolean)
returns table (r_released bigint, r_queue_name text, r_partition_name text, r_answer jsonb)
language plpgsql set enable_seqscan = off as $$
declare
  v_n     int := cardinality(p_offsets);
  v_txid  text[];
  v_pid   uuid[];
  v_lease uuid[];
  v_off   bigint[];
  v_given bigint[];
  v_found boolean;
  v_pids  uuid[];
  v_plain boolean;
  v_fast  boolean;
  v_lo    bigint;
  v_hi    bigint;
  v_ids   text[];
  v_map   jsonb;
  v_out   jsonb;
  v_cur   queen.cursors%rowtype;
  -- The one item whose move ends a live lease: the first to reach its last offset.
  v_released bigint;
  -- The walk's. Results by idx in a plpgsql array (assigned in place), JSON
  -- once at the end: growing a jsonb value per item copies it each time (quadratic).
  v_results       jsonb[];
  v_item          record;
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
  -- 1. A pop's run.
  <<run>>
  begin
    exit run when p_offsets is null or p_walk;
    select min(o), max(o), count(distinct o) = v_n into v_lo, v_hi, v_found from unnest(p_offsets) o;
    -- A sparse run (a few items out of a long range) is checked by the general path's key probes instead.
    if v_n = 0 or not coalesce(v_found, false) or cardinality(p_txids) is distinct from v_n or v_hi - v_lo >= 2 * v_n then
      exit run;
    end if;
    select array_agg(coalesce(m.transaction_id, m.id::text) order by m.msg_offset), count(*) = v_hi - v_lo + 1
      into v_ids, v_found
      from queen.messages m
     where m.partition_id = p_partition_id and m.msg_offset between v_lo and v_hi;
    -- Every offset of the range is there, so position k holds offset v_lo + k - 1.
    if v_found then
      select bool_and(v_ids[(i.off - v_lo + 1)::int] = i.txid) into v_found from unnest(p_offsets, p_txids) as i(off, txid);
    end if;
    if not coalesce(v_found, false) then
      exit run;
    end if;

    select * into v_cur from queen.cursors c
     where c.partition_id = p_partition_id and c.consumer_group = p_group
       for update;
    -- log_ack_fence_v1 for every item at once: its checks are monotonic in the
    -- offset, so the lowest and highest offsets decide.
    if not found
       or queen.log_ack_fence_v1(v_lo, p_lease, v_cur.cursor_offset, v_cur.lease_id, v_cur.lease_expires_at, v_cur.lease_last_offset, false) is not null
       or queen.log_ack_fence_v1(v_hi, p_lease, v_cur.cursor_offset, v_cur.lease_id, v_cur.lease_expires_at, v_cur.lease_last_offset, false) is not null then
      exit run;
    end if;

    perform queen.log_ack_move_v1(p_group, array[p_partition_id], array[v_hi]);
    return query
      select case when v_cur.lease_id is not null then (select min(o) from unnest(p_offsets) o where o >= v_cur.lease_last_offset) end,
             p.queue_name, p.name, null::jsonb
        from queen.partitions p
       where p.id = p_partition_id;
    return;
  end;
  if p_items is null then
    -- A run 1 did not take: its items as the broker sends any other ack.
    select jsonb_agg(jsonb_build_object('idx', i.n - 1, 'transactionId', i.txid, 'partitionId', p_partition_id, 'leaseId', p_lease,
                                        'offset', i.off::text, 'status', 'completed') order by i.n)
      into p_items
      from unnest(p_offsets, p_txids) with ordinality as i(off, txid, n);
  end if;

  -- 2. Every item completed: one move per partition.
  <<common>>
  begin
    exit common when p_walk;
    select array_agg(i."transactionId" order by i.n), array_agg(i."partitionId" order by i.n),
           array_agg(i."leaseId" order by i.n), array_agg(i."offset" order by i.n),
           bool_and(coalesce(i.status, 'completed') in ('completed', 'success')),
           min(i."offset"), max(i."offset"), array_agg(distinct i."partitionId")
      into v_txid, v_pid, v_lease, v_given, v_plain, v_lo, v_hi, v_pids
      from rows from (jsonb_to_recordset(p_items) as ("transactionId" text, "partitionId" uuid, "leaseId" uuid, "offset" bigint, status text))
           with ordinality as i("transactionId", "partitionId", "leaseId", "offset", status, n);
    if not coalesce(v_plain, false) then
      exit common;
    end if;
    -- Which messages, when every item names its offset (our client sends what
    -- the pop answered): the item's transactionId must be the one stored at
    -- that offset, which decides. The items of one pop (one partition, a
    -- dense range of offsets) are checked against one index range scan of
    -- that range, read into an array by position; others by one primary-key
    -- probe per item.
    if array_position(v_given, null) is null then
      if cardinality(v_pids) = 1 and v_hi - v_lo < 2 * cardinality(v_given) then
        select array_agg(coalesce(m.transaction_id, m.id::text) order by m.msg_offset), count(*) = v_hi - v_lo + 1
          into v_ids, v_found
          from queen.messages m
         where m.partition_id = v_pids[1] and m.msg_offset between v_lo and v_hi;
        -- Every offset of the range is there, so position k holds offset v_lo + k - 1.
        if v_found then
          select bool_and(v_ids[(i.off - v_lo + 1)::int] = i.txid) into v_found from unnest(v_given, v_txid) as i(off, txid);
        end if;
      end if;
      if coalesce(v_found, false) then
        v_off := v_given;
      else
        select array_agg(m.msg_offset order by i.n), bool_and(m.msg_offset is not null)
          into v_off, v_found
          from unnest(v_pid, v_txid, v_given) with ordinality as i(pid, txid, off, n)
          left join queen.messages m
            on m.partition_id = i.pid and m.msg_offset = i.off and coalesce(m.transaction_id, m.id::text) = i.txid;
      end if;
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
          exit common;
        end if;
      end if;
    end if;

    perform queen.log_ack_lock_v1(p_group, v_pids);

    if cardinality(v_pids) = 1 then
      -- One partition (what one pop's consumer acks): its cursor row read
      -- once, the items checked against it in one pass over the arrays, and
      -- the answer built from them without sorting anything. As below.
      select * into v_cur from queen.cursors c where c.partition_id = v_pids[1] and c.consumer_group = p_group;
      if not found then
        exit common;
      end if;
      select count(distinct i.off) = count(*)
             and bool_and(queen.log_ack_fence_v1(i.off, i.lease, v_cur.cursor_offset, v_cur.lease_id, v_cur.lease_expires_at, v_cur.lease_last_offset, false) is null),
             min(i.off) filter (where v_cur.lease_id is not null and i.off >= v_cur.lease_last_offset)
        into v_fast, v_released
        from unnest(v_off, v_lease) as i(off, lease);
      if not coalesce(v_fast, false) then
        exit common;
      end if;
      v_out := jsonb_build_object(
        'offsets', to_jsonb(v_off::text[]),
        'released', to_jsonb(array(select coalesce(o.off = v_released, false) from unnest(v_off) with ordinality as o(off, n) order by o.n)),
        'names', (select jsonb_object_agg(p.id, jsonb_build_array(p.queue_name, p.name)) from queen.partitions p where p.id = v_pids[1]));
      perform queen.log_ack_move_v1(p_group, v_pid, v_off);
      return query select null::bigint, null::text, null::text, v_out;
      return;
    end if;

    -- In one pass over the items joined to their cursor rows as found: whether
    -- every item passes the fence and none repeats another (else the walk
    -- decides item by item), and the answer, compact: every item succeeded,
    -- so what differs per item is its offset and whether its cursor move
    -- ended the lease (the item reaching the lease's last offset, as in the
    -- walk); the broker expands it into the per-item results (ack.ts).
    select count(*) = cardinality(v_pid) and coalesce(bool_and(r.ok), false),
           jsonb_build_object(
             'offsets', to_jsonb(array_agg(r.off::text order by r.n)),
             'released', to_jsonb(array_agg(coalesce(r.released, false) order by r.n)),
             'names', (select jsonb_object_agg(p.id, jsonb_build_array(p.queue_name, p.name)) from queen.partitions p where p.id = any(v_pids)))
      into v_fast, v_out
      from (select i.n, i.off,
                   queen.log_ack_fence_v1(i.off, i.lease, c.cursor_offset, c.lease_id, c.lease_expires_at, c.lease_last_offset, false) is null
                   and count(*) over (partition by i.pid, i.off) = 1 as ok,
                   c.lease_id is not null and c.lease_last_offset is not null
                   and i.off = min(i.off) filter (where i.off >= c.lease_last_offset) over (partition by i.pid) as released
              from unnest(v_pid, v_off, v_lease) with ordinality as i(pid, off, lease, n)
              join queen.cursors c on c.partition_id = i.pid and c.consumer_group = p_group) r;
    if not coalesce(v_fast, false) then
      exit common;
    end if;

    perform queen.log_ack_move_v1(p_group, v_pid, v_off);
    return query select null::bigint, null::text, null::text, v_out;
    return;
  end;

  -- 3. The walk.
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
        -- The partition waits for the queue's retry delay, if it sets one
        -- (issue 32): the pop skips it for this group until retry_at.
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

  return query select null::bigint, null::text, null::text, to_jsonb(v_results);
end
$$;
