-- Hot paths made set-based. Measured with track_functions = 'pl' on a
-- pop + ack loop of batches of 100 (one connection, 8 partitions): the ack
-- cost 36.7 ms per batch, because it moved the cursor once per message
-- (queen.log_move_cursor_v1: an update and a delete each) and decoded every
-- message id through a regex. Nothing here changes what a caller sees.

-- The offset a message id carries, without a regex: the same answer as 001's
-- (null for anything that is not a queen.uuid_v7 text), at 0.2 µs instead of
-- ~18 µs a call. Every ack item resolves its message through this.
create or replace function queen.id_offset(p_id text) returns bigint
language sql immutable parallel safe as $$
  select case when length(p_id) = 36
               and substr(p_id, 9, 1) = '-' and substr(p_id, 14, 1) = '-' and substr(p_id, 19, 1) = '-' and substr(p_id, 24, 1) = '-'
               -- four dashes (placed above) and nothing but hex digits besides
               and translate(lower(p_id), '0123456789abcdef', '') = '----'
               and substr(p_id, 15, 1) = '7' and strpos('89abAB', substr(p_id, 20, 1)) > 0 then
    (('x' || substr(p_id, 16, 3))::bit(12)::bigint << 30)
    | ((('x' || substr(p_id, 20, 4))::bit(16)::bigint & 16383) << 16)
    | ('x' || substr(p_id, 25, 4))::bit(16)::bigint
  end
$$;

-- The offsets of many (partition, transactionId) pairs at once, in input
-- order (null where none is retained): queen.message_offset_v1's two index
-- lookups written inline, because a SQL function whose body holds
-- sub-selects is never inlined, and calling it per ack item cost ~0.4 ms a
-- call inside a plpgsql loop. Both are full-key equalities on unique
-- indexes, so they stay index lookups whatever the statistics say.
create or replace function queen.message_offsets_v1(p_pids uuid[], p_txids text[])
returns table (ord bigint, msg_offset bigint)
language sql stable parallel safe as $$
  select x.ord, coalesce(
    (select m.msg_offset from queen.messages m
      where m.partition_id = x.pid and m.transaction_id = x.txid),
    (select m.msg_offset from queen.messages m
      where m.partition_id = x.pid and m.msg_offset = queen.id_offset(x.txid)
        and m.transaction_id is null and m.id::text = lower(x.txid)))
    from unnest(p_pids, p_txids) with ordinality as x(pid, txid, ord)
$$;

-- The item-by-item ack of 002 stays, under another name, for the requests
-- that need it: failed, retry and dlq items, unknown messages, repeats, and
-- items the lease does not cover.
alter function queen.log_ack_v1(text, jsonb) rename to log_ack_items_v1;

-- Ack (PROTOCOL §5.5). The common request, every item `completed` for a
-- retained message past the cursor and (when it names a lease) inside that
-- live lease, is one cursor move per partition: the cursor goes to the
-- highest acked offset and the lease ends once it reaches what the lease
-- delivered, exactly where the item-by-item walk would put them. Anything
-- else goes through queen.log_ack_items_v1 unchanged. Same locks, same order
-- (cursor rows created, then locked, ascending), same outcome. Answers the
-- walk's per-item array, or for the common request the compact
-- {offsets, released, names} that the broker expands (ack.ts).
create function queen.log_ack_v1(p_group text, p_items jsonb) returns jsonb
language plpgsql as $$
declare
  v_txid  text[];
  v_pid   uuid[];
  v_lease uuid[];
  v_off   bigint[];
  v_pids  uuid[];
  v_plain boolean;
  v_fast  boolean;
  v_map   jsonb;
  v_out   jsonb;
begin
  select array_agg(e->>'transactionId' order by n), array_agg((e->>'partitionId')::uuid order by n),
         array_agg((e->>'leaseId')::uuid order by n), bool_and(coalesce(e->>'status', 'completed') in ('completed', 'success'))
    into v_txid, v_pid, v_lease, v_plain
    from jsonb_array_elements(p_items) with ordinality as t(e, n);
  if not coalesce(v_plain, false) then
    return queen.log_ack_items_v1(p_group, p_items);
  end if;
  -- Which messages: a consumer acks what its lease delivered, so each leased
  -- partition's range (cursor, lease_last] is read once into a map from wire
  -- transactionId to offset, and the items are looked up in it, instead of
  -- two index probes per item. A map, not a join: the planner sizes unnested
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

  select array_agg(distinct x order by x) into v_pids from unnest(v_pid) x;
  insert into queen.cursors (partition_id, consumer_group, cursor_offset)
  select p.id, p_group, queen.log_cursor_start_v1(p.id, p_group)
    from queen.partitions p
   where p.id = any(v_pids)
     and not exists (select 1 from queen.cursors c where c.partition_id = p.id and c.consumer_group = p_group)
   order by p.id
  on conflict do nothing;
  perform 1 from queen.cursors c
   where c.consumer_group = p_group and c.partition_id = any(v_pids)
   order by c.partition_id, c.consumer_group for update;

  -- Every item moves the cursor (nothing repeated, nothing at or below it)
  -- and passes its lease fence as the request found it.
  select count(*) = cardinality(v_pid)
         and count(distinct (i.pid, i.off)) = count(*)
         and coalesce(bool_and(i.off > c.cursor_offset
               and (i.lease is null or (c.lease_id = i.lease and c.lease_expires_at > now() and i.off <= c.lease_last_offset))), false)
    into v_fast
    from unnest(v_pid, v_off, v_lease) as i(pid, off, lease)
    join queen.cursors c on c.partition_id = i.pid and c.consumer_group = p_group;
  if not v_fast then
    return queen.log_ack_items_v1(p_group, p_items);
  end if;

  -- The answer, compact: every item succeeded, so what differs per item is
  -- its offset and whether its cursor move ended the lease (the item reaching
  -- the lease's last offset, as in the walk); the broker expands it into the
  -- per-item results (ack.ts). Building eleven-key JSON objects per item here
  -- cost as much as the rest of the ack. Read from the cursor rows as found.
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

  update queen.cursors c
     set cursor_offset = greatest(c.cursor_offset, m.last),
         last_acked_at = now(),
         lease_id          = case when c.lease_last_offset is not null and greatest(c.cursor_offset, m.last) >= c.lease_last_offset then null else c.lease_id end,
         lease_expires_at  = case when c.lease_last_offset is not null and greatest(c.cursor_offset, m.last) >= c.lease_last_offset then null else c.lease_expires_at end,
         lease_last_offset = case when c.lease_last_offset is not null and greatest(c.cursor_offset, m.last) >= c.lease_last_offset then null else c.lease_last_offset end
    from (select i.pid, max(i.off) as last from unnest(v_pid, v_off) as i(pid, off) group by i.pid) m
   where c.partition_id = m.pid and c.consumer_group = p_group;
  delete from queen.failures f
   using (select i.pid, max(i.off) as last from unnest(v_pid, v_off) as i(pid, off) group by i.pid) m
   where f.partition_id = m.pid and f.consumer_group = p_group and f.msg_offset <= m.last;
  return v_out;
end
$$;

-- The wire time format, inlined at last: to_char is stable (it reads the
-- session's locale settings), and a SQL function declared more strictly than
-- its body is never inlined, so every popped message paid a separate
-- function execution for its createdAt (about a third of a batch-100 pop).
create or replace function queen.iso(ts timestamptz) returns text
language sql stable parallel safe as $$
  select to_char(ts at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
$$;

-- State ops of one cycle element (PROTOCOL §7.4): every op a compare-and-set
-- when it carries expected_version, applied in array order. Measured on a
-- map stream, the op-by-op loop (a SELECT … FOR UPDATE, a nextval and an
-- upsert per key) was most of a cycle's time; with distinct keys (what the
-- engine sends) the same is three statements: lock and read every row, check
-- every expectation, write. Repeated keys keep the op-by-op walk, where a
-- later op sees the earlier one's version. Answers {applied, results}; a
-- failed expectation raises QS001 (the element's savepoint undoes the rest).
create function queen_streams.apply_state_ops_v1(p_qid uuid, p_pid uuid, p_ops jsonb) returns jsonb
language plpgsql as $$
declare
  v_op       jsonb;
  v_key      text;
  v_expected bigint;
  v_current  bigint;
  v_version  bigint;
  v_bad      record;
  v_results  jsonb := '[]'::jsonb;
  v_applied  int := 0;
  v_keys     text[];
  v_types    text[];
  v_values   jsonb[];
  v_expects  bigint[];
  v_distinct boolean;
  v_bad_type text;
  v_has_bad  boolean;
begin
  if jsonb_array_length(p_ops) = 0 then
    return jsonb_build_object('applied', 0, 'results', '[]'::jsonb);
  end if;
  -- The ops read once into arrays; every statement below works on those.
  select array_agg(e->>'key' order by n), array_agg(e->>'type' order by n), array_agg(e->'value' order by n),
         array_agg((e->>'expected_version')::bigint order by n), count(distinct e->>'key') = count(*),
         (array_agg(e->>'type') filter (where e->>'type' is distinct from 'upsert' and e->>'type' is distinct from 'delete'))[1],
         bool_or(e->>'type' is distinct from 'upsert' and e->>'type' is distinct from 'delete')
    into v_keys, v_types, v_values, v_expects, v_distinct, v_bad_type, v_has_bad
    from jsonb_array_elements(p_ops) with ordinality as t(e, n);
  if v_has_bad then
    raise exception 'unknown state op type %', v_bad_type using errcode = '22023';
  end if;

  if v_distinct then
    -- Rows locked in key order (two cycles of one shard already serialise on
    -- the advisory lock; the order keeps a raw caller's overlap deadlock-free).
    perform 1 from queen_streams.state s
     where s.query_id = p_qid and s.partition_id = p_pid and s.key = any(v_keys)
     order by s.key for update;
    select o.key, o.expected, coalesce(s.version, 0) as current into v_bad
      from unnest(v_keys, v_types, v_expects) with ordinality as o(key, type, expected, ord)
      left join queen_streams.state s on s.query_id = p_qid and s.partition_id = p_pid and s.key = o.key
     where o.expected is not null
       and (coalesce(s.version, 0) <> o.expected or (o.type = 'delete' and s.version is null))
     order by o.ord limit 1;
    if found then
      perform queen_streams.fail('VERSION_CONFLICT',
        format('Version conflict on state key %s: expected %s, current %s', v_bad.key, v_bad.expected, v_bad.current),
        jsonb_build_object('key', v_bad.key, 'currentVersion', v_bad.current));
    end if;

    delete from queen_streams.state s
     where s.query_id = p_qid and s.partition_id = p_pid
       and s.key in (select o.key from unnest(v_keys, v_types) as o(key, type) where o.type = 'delete');
    with ups as (
      insert into queen_streams.state as s (query_id, partition_id, key, value, version, updated_at)
      select p_qid, p_pid, o.key, coalesce(o.value, 'null'::jsonb), nextval('queen_streams.state_version_seq'), now()
        from unnest(v_keys, v_types, v_values) with ordinality as o(key, type, value, n)
       where o.type = 'upsert' order by o.n
      on conflict (query_id, partition_id, key)
      do update set value = excluded.value, version = excluded.version, updated_at = excluded.updated_at
      returning s.key, s.version
    )
    select jsonb_agg(jsonb_build_object('key', o.key, 'type', o.type, 'version', u.version) order by o.n)
      into v_results
      from unnest(v_keys, v_types) with ordinality as o(key, type, n)
      left join ups u on o.type = 'upsert' and u.key = o.key;
    return jsonb_build_object('applied', cardinality(v_keys), 'results', v_results);
  end if;

  for v_op in select e from jsonb_array_elements(p_ops) e loop
    v_key := v_op->>'key';
    v_expected := (v_op->>'expected_version')::bigint;
    select s.version into v_current from queen_streams.state s
     where s.query_id = p_qid and s.partition_id = p_pid and s.key = v_key
       for update;
    if not found then v_current := null; end if;
    if v_expected is not null and (
         coalesce(v_current, 0) <> v_expected
         -- a delete with expected_version fails when the row is gone
         or (v_op->>'type' = 'delete' and v_current is null)) then
      perform queen_streams.fail('VERSION_CONFLICT',
        format('Version conflict on state key %s: expected %s, current %s', v_key, v_expected, coalesce(v_current, 0)),
        jsonb_build_object('key', v_key, 'currentVersion', coalesce(v_current, 0)));
    end if;
    if v_op->>'type' = 'upsert' then
      v_version := nextval('queen_streams.state_version_seq');
      insert into queen_streams.state as s (query_id, partition_id, key, value, version, updated_at)
      values (p_qid, p_pid, v_key, coalesce(v_op->'value', 'null'::jsonb), v_version, now())
      on conflict (query_id, partition_id, key)
      do update set value = excluded.value, version = excluded.version, updated_at = excluded.updated_at;
      v_results := v_results || jsonb_build_array(jsonb_build_object('key', v_key, 'type', 'upsert', 'version', v_version));
    else
      delete from queen_streams.state s where s.query_id = p_qid and s.partition_id = p_pid and s.key = v_key;
      v_results := v_results || jsonb_build_array(jsonb_build_object('key', v_key, 'type', 'delete', 'version', null));
    end if;
    v_applied := v_applied + 1;
  end loop;
  return jsonb_build_object('applied', v_applied, 'results', v_results);
end
$$;

-- A cycle's sink pushes (PROTOCOL §7.4): the whole list through
-- queen.log_push_many_v1, the allocator a push request uses (append locks
-- ascending, each target partition's run appended once, same dedup and
-- offsets), instead of one queen.log_push_one_v1 call per output: a map
-- stream appended 500 outputs per cycle one at a time, moving the sink
-- partition's head 500 times. Items: [{partition_id? | queue + partition?,
-- payload, transactionId?, traceId?, encrypted?}]. Answers the push_results
-- array in item order.
create function queen_streams.push_sink_items_v1(p_items jsonb, p_producer_sub text) returns jsonb
language plpgsql as $$
declare
  v_items   jsonb;
  v_pids    uuid[];
  v_txids   text[];
  v_traces  jsonb[];
  v_missing jsonb;
  v_out     jsonb;
begin
  if jsonb_array_length(p_items) = 0 then return '[]'::jsonb; end if;
  -- The route passes partition ids (it ensured the partitions first); a raw
  -- caller may name queue and partition, which must exist.
  with t as (
    select n, e, coalesce((e->>'partition_id')::uuid,
             (select p.id from queen.partitions p where p.queue_name = e->>'queue' and p.name = coalesce(e->>'partition', 'Default'))) as pid
      from jsonb_array_elements(p_items) with ordinality as x(e, n))
  select jsonb_agg(jsonb_build_object('partition_id', t.pid, 'payload', coalesce(t.e->'payload', 'null'::jsonb),
                     'transaction_id', t.e->>'transactionId', 'trace_id', t.e->>'traceId')
                   || case when t.e ? 'encrypted' then jsonb_build_object('encrypted', t.e->'encrypted') else '{}'::jsonb end order by t.n),
         array_agg(t.pid order by t.n), array_agg(t.e->>'transactionId' order by t.n), array_agg(t.e->'traceId' order by t.n),
         (array_agg(t.e order by t.n) filter (where t.pid is null))[1]
    into v_items, v_pids, v_txids, v_traces, v_missing
    from t;
  if v_missing is not null then
    raise exception 'partition %/% does not exist', v_missing->>'queue', coalesce(v_missing->>'partition', 'Default') using errcode = 'P0002';
  end if;

  -- Inputs by array subscript (O(1)), not joined back as row sets.
  select jsonb_agg(jsonb_build_object(
           'index', r.n - 1, 'transaction_id', coalesce(v_txids[r.n], r.message_id::text), 'status', r.status,
           'message_id', r.message_id, 'partition_id', v_pids[r.n], 'queueName', p.queue_name, 'offset', r.off::text)
         || case when r.status = 'queued' then jsonb_build_object('trace_id', v_traces[r.n]) else '{}'::jsonb end
         order by r.n)
    into v_out
    from queen.log_push_many_v1(v_items, p_producer_sub) with ordinality as r(status, message_id, off, n)
    join queen.partitions p on p.id = v_pids[r.n];
  return v_out;
end
$$;

-- The broker's own form of the same: `sink_items` already in the
-- allocator's shape ({partition_id, payload, transaction_id, trace_id,
-- encrypted?}, partitions ensured by the route), passed to
-- queen.log_push_many_v1 as they are, and an answer of three arrays
-- ({status, message_id, offset}, item order) that the route expands into
-- push_results from its own items (streams-cycle.ts). Rebuilding 500 items
-- into that shape and 500 result objects out of it took two thirds of a map
-- cycle's SQL time.
create function queen_streams.push_sink_runs_v1(p_items jsonb, p_producer_sub text) returns jsonb
language sql as $$
  select jsonb_build_object(
           'status', coalesce(jsonb_agg(r.status order by r.n), '[]'::jsonb),
           'message_id', coalesce(jsonb_agg(r.message_id order by r.n), '[]'::jsonb),
           'offset', coalesce(jsonb_agg(r.off::text order by r.n), '[]'::jsonb))
    from queen.log_push_many_v1(p_items, p_producer_sub) with ordinality as r(status, message_id, off, n)
   where jsonb_array_length(p_items) > 0
$$;

-- One cycle element, as in 003, with its state ops and sink pushes set-based
-- (queen_streams.apply_state_ops_v1, queen_streams.push_sink_items_v1). Same
-- locks in the same order, same answer.
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
  v_k          bigint;
  v_count      int;
  v_release    boolean := coalesce((p_el->>'release_lease')::boolean, true);
  v_released   boolean;
  v_status     text;
  v_lease      uuid;
begin
  -- Rank 3: the query row first (a drop or reset holding it FOR UPDATE makes
  -- us wait, then find it gone), then the (query, partition) shard lock, so a
  -- flush and a cycle of one shard serialise before either writes.
  perform 1 from queen_streams.queries q where q.query_id = v_qid for key share;
  if not found then
    perform queen_streams.fail('QUERY_NOT_FOUND', 'Stream query not found');
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
      perform queen_streams.fail('MESSAGE_NOT_FOUND', 'Message not found');
    end if;

    insert into queen.cursors (partition_id, consumer_group, cursor_offset)
    values (v_pid, v_group, queen.log_cursor_start_v1(v_pid, v_group))
    on conflict do nothing;
    select * into v_cur from queen.cursors c where c.partition_id = v_pid and c.consumer_group = v_group for update;

    -- Fencing: a retried or zombie cycle whose lease is gone rolls back with
    -- its sink pushes (SEED "Why it is exactly-once").
    if v_lease is not null then
      if v_cur.lease_id is distinct from v_lease or v_cur.lease_expires_at <= now() then
        perform queen_streams.fail('LEASE_EXPIRED', 'Invalid or expired lease');
      end if;
    end if;
    if v_msg_offset <= v_cur.cursor_offset then
      perform queen_streams.fail('ALREADY_ACKED', 'Message already acknowledged');
    end if;
    if v_lease is not null and v_msg_offset > v_cur.lease_last_offset then
      perform queen_streams.fail('MESSAGE_NOT_LEASED', 'Message is beyond what this lease delivered');
    end if;
    if v_ack ? 'count' and v_ack->'count' <> 'null'::jsonb then
      v_k := (v_ack->>'count')::bigint;
      if queen.log_advance_v1(v_pid, v_cur.cursor_offset, v_k) is distinct from v_msg_offset then
        perform queen_streams.fail('ACK_COUNT_MISMATCH',
          format('ack.count %s does not land on the message at offset %s', v_k, v_msg_offset));
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

    -- Like queen.log_move_cursor_v1, except that the lease ends only when the
    -- cycle says so: release_lease:false is a gate's partial ack, and the lease
    -- must run on (its expiry returns the denied tail), even when the cursor
    -- reaches what the lease delivered.
    update queen.cursors c
       set cursor_offset = greatest(c.cursor_offset, v_msg_offset),
           last_acked_at = now(),
           lease_id          = case when v_release then null else c.lease_id end,
           lease_expires_at  = case when v_release then null else c.lease_expires_at end,
           lease_last_offset = case when v_release then null else c.lease_last_offset end
     where c.partition_id = v_pid and c.consumer_group = v_group;
    delete from queen.failures f
     where f.partition_id = v_pid and f.consumer_group = v_group and f.msg_offset <= v_msg_offset;
    -- lease_released tells the broker the partition is poppable again: it
    -- wakes long-polls on every replica after commit (no NOTIFY in here).
    v_released := v_release and v_cur.lease_id is not null;

    v_ack_res := jsonb_build_object('success', true, 'count', v_count, 'lease_released', v_released,
      'dlq', v_status in ('failed', 'dlq'), 'offset', v_msg_offset::text);
  end if;

  return jsonb_build_object('success', true, 'state_ops_applied', v_applied, 'state_results', v_state_res,
    'push_results', v_push_res, 'ack_result', v_ack_res);
end
$$;


-- The allocator core of 001, with one change: the retained-duplicate probe
-- of a run with many transactionIds is set-based (see the branch below).
-- Everything else, dedup semantics included, is as it was.
create or replace function queen.log_append_v1(p_partition_id uuid, p_items jsonb, p_producer_sub text)
returns table (r_ord bigint, r_status text, r_message_id uuid, r_offset bigint, r_transaction_id text, r_created_at timestamptz)
language plpgsql as $$
declare
  v_part        queen.partitions%rowtype;
  v_created     timestamptz;
  v_status      text[];
  v_ids         uuid[];
  v_offsets     bigint[];
  v_txids       text[];
  v_created_ats timestamptz[];
  v_new         bigint;
  v_head        bigint;
  v_from        bigint;
  v_to          bigint;
  v_seg_first   bigint;
  v_seg_started timestamptz;
  v_max_msgs    int := queen.setting_int('queen.segment_max_messages', 10000);
  v_max_age     int := queen.setting_int('queen.segment_max_age_s', 3600);
  v_txid        text;
  v_with_txid   bigint;
  v_distinct    text[];
  v_dup         record;
  v_dup_txids   text[] := '{}';
  v_dup_ids     uuid[] := '{}';
  v_dup_offsets bigint[] := '{}';
  v_dup_created timestamptz[] := '{}';
  v_tail        bytea := substring(uuid_send(gen_random_uuid()) from 1 for 4);
begin
  select * into v_part from queen.partitions where id = p_partition_id for update;
  if not found then
    raise exception 'partition % does not exist', p_partition_id using errcode = 'P0002';
  end if;
  -- createdAt never goes backwards inside a partition, even if the clock does.
  v_created := greatest(clock_timestamp(), coalesce(v_part.last_created_at, '-infinity'::timestamptz));

  -- Retained duplicates: index lookups per distinct transactionId (see
  -- queen.message_offset_v1). Plain statements on purpose: a join here let
  -- the planner freeze a plan from when the table was young (its statistics
  -- said "empty") that read the partition's every message on each push: the
  -- first 100k messages of a new database went quadratic. A full-key
  -- equality on a unique index is planned as that index lookup whatever the
  -- statistics say.
  select count(e->>'transaction_id'), array_agg(distinct e->>'transaction_id') filter (where e->>'transaction_id' is not null)
    into v_with_txid, v_distinct
    from jsonb_array_elements(p_items) e;
  if cardinality(coalesce(v_distinct, '{}')) <= 8 then
    foreach v_txid in array coalesce(v_distinct, '{}') loop
      -- A chosen transactionId, or the id of a message pushed without one.
      select m.id, m.msg_offset, m.created_at into v_dup
        from queen.messages m
       where m.partition_id = p_partition_id and m.msg_offset = queen.message_offset_v1(p_partition_id, v_txid);
      if found then
        v_dup_txids   := v_dup_txids || v_txid;
        v_dup_ids     := v_dup_ids || v_dup.id;
        v_dup_offsets := v_dup_offsets || v_dup.msg_offset;
        v_dup_created := v_dup_created || v_dup.created_at;
      end if;
    end loop;
  else
    -- Many transactionIds (a stream cycle's sink outputs all carry one): two
    -- index scans for the whole run instead of two probes per id (~25 µs
    -- each, most of a 500-output cycle). Planned per call (EXECUTE), for the
    -- table as it is now: a generic plan frozen while the table was young
    -- could read the whole partition on every push. A chosen
    -- transactionId wins over a broker id spelled the same, as in
    -- queen.message_offset_v1.
    execute $q$
      select coalesce(array_agg(d.txid), '{}'), coalesce(array_agg(d.id), '{}'),
             coalesce(array_agg(d.msg_offset), '{}'), coalesce(array_agg(d.created_at), '{}')
        from (select distinct on (u.txid) u.txid, u.id, u.msg_offset, u.created_at
                from (select m.transaction_id as txid, m.id, m.msg_offset, m.created_at, 0 as pref
                        from queen.messages m
                       where m.partition_id = $1 and m.transaction_id = any($2)
                      union all
                      select x.txid, m.id, m.msg_offset, m.created_at, 1
                        from (select t as txid, queen.id_offset(t) as off from unnest($2) t) x
                        join queen.messages m on m.partition_id = $1 and m.msg_offset = x.off
                       where x.off is not null and m.transaction_id is null and m.id::text = lower(x.txid)) u
               order by u.txid, u.pref) d
    $q$ into v_dup_txids, v_dup_ids, v_dup_offsets, v_dup_created using p_partition_id, v_distinct;
  end if;

  if v_with_txid = cardinality(coalesce(v_distinct, '{}')) and cardinality(v_dup_txids) = 0 then
    -- Every item is new (the common case): offset head+ord for item ord,
    -- straight from the input into the table.
    return query
    with ins as (
      insert into queen.messages (partition_id, msg_offset, id, transaction_id, trace_id, payload, encrypted, producer_sub, created_at)
      select p_partition_id, v_part.head_offset + x.ord, x.id, x.e->>'transaction_id', (x.e->>'trace_id')::uuid,
             case when x.e ? 'encrypted' then null else x.e->'payload' end,
             case when x.e ? 'encrypted' then decode(x.e->>'encrypted', 'base64') end, p_producer_sub, v_created
        from (select j.e, j.ord, queen.uuid_v7(v_created, v_part.head_offset + j.ord, v_tail) as id
                from jsonb_array_elements(p_items) with ordinality as j(e, ord)) x
      returning msg_offset, id, transaction_id
    )
    select i.msg_offset - v_part.head_offset, 'queued'::text, i.id, i.msg_offset, i.transaction_id, v_created from ins i;
    v_new := jsonb_array_length(p_items);
  else
    -- Duplicates: one pass, no self-joins (a 10k-item push stays linear): window
    -- functions mark each transactionId's first occurrence, first
    -- occurrences meet the retained duplicates found above, and later
    -- occurrences copy the first one's outcome.
    with items as (
      select x.ord, x.e->>'transaction_id' as txid, x.e->'payload' as payload, (x.e->>'trace_id')::uuid as trace_id,
             case when x.e ? 'encrypted' then decode(x.e->>'encrypted', 'base64') end as enc,
             (x.e->>'transaction_id' is null or x.ord = min(x.ord) over (partition by x.e->>'transaction_id')) as is_first
        from jsonb_array_elements(p_items) with ordinality as x(e, ord)
    ),
    retained as (
      select * from unnest(v_dup_txids, v_dup_ids, v_dup_offsets, v_dup_created) as d(transaction_id, id, msg_offset, created_at)
    ),
    probed as (
      select i.*, d.id as dup_id, d.msg_offset as dup_off, d.created_at as dup_created,
             (i.is_first and d.id is null) as is_new
        from items i left join retained d on i.is_first and d.transaction_id = i.txid
    ),
    assigned as materialized (
      select n.*, case when n.is_new then queen.uuid_v7(v_created, n.off, v_tail) end as new_id
        from (select p.*, v_part.head_offset + sum(case when p.is_new then 1 else 0 end) over (order by p.ord) as off
                from probed p) n
    ),
    resolved as (
      select a.*,
             first_value(coalesce(a.new_id, a.dup_id)) over w as first_id,
             first_value(case when a.is_new then a.off else a.dup_off end) over w as first_off,
             first_value(case when a.is_new then v_created else a.dup_created end) over w as first_created
        from assigned a
      window w as (partition by a.txid, case when a.txid is null then a.ord end order by a.ord)
    ),
    ins as (
      insert into queen.messages (partition_id, msg_offset, id, transaction_id, trace_id, payload, encrypted, producer_sub, created_at)
      select p_partition_id, off, new_id, txid, trace_id,
             case when enc is null then payload end, enc, p_producer_sub, v_created
        from assigned where is_new
    )
    -- Results as plain columns: building a jsonb object per item cost more
    -- than the insert itself; callers shape the JSON they need.
    select array_agg(case when r.is_new then 'queued' else 'duplicate' end order by r.ord),
           array_agg(case when r.is_new then r.new_id else r.first_id end order by r.ord),
           array_agg(case when r.is_new then r.off else r.first_off end order by r.ord),
           array_agg(r.txid order by r.ord),
           array_agg(case when r.is_new then v_created else r.first_created end order by r.ord),
           count(*) filter (where r.is_new)
      into v_status, v_ids, v_offsets, v_txids, v_created_ats, v_new
      from resolved r;

    return query
      select u.ord, u.status, u.id, u.off, u.txid, u.created
        from unnest(v_status, v_ids, v_offsets, v_txids, v_created_ats) with ordinality as u(status, id, off, txid, created, ord);
  end if;

  if v_new > 0 then
    -- Segment bookkeeping: fill the open segment while it has room and is
    -- young (it may have been dropped by retention: then open a new one), then
    -- open segments of at most v_max_msgs for the rest.
    v_head        := v_part.head_offset + v_new;
    v_from        := v_part.head_offset + 1;
    v_seg_first   := v_part.segment_first;
    v_seg_started := v_part.segment_started_at;
    if v_seg_first is not null then
      if v_part.head_offset - v_seg_first + 1 < v_max_msgs and v_created - v_seg_started < make_interval(secs => v_max_age) then
        v_to := least(v_head, v_seg_first + v_max_msgs - 1);
        update queen.log_segments set last_offset = v_to, last_created_at = v_created
         where partition_id = p_partition_id and first_offset = v_seg_first;
        if found then v_from := v_to + 1; else v_seg_first := null; end if;
      end if;
    end if;
    while v_from <= v_head loop
      if v_seg_first is not null then
        update queen.log_segments set sealed = true where partition_id = p_partition_id and first_offset = v_seg_first;
      end if;
      v_to := least(v_head, v_from + v_max_msgs - 1);
      insert into queen.log_segments (partition_id, first_offset, last_offset, first_created_at, last_created_at)
      values (p_partition_id, v_from, v_to, v_created, v_created);
      v_seg_first   := v_from;
      v_seg_started := v_created;
      v_from        := v_to + 1;
    end loop;

    update queen.partitions
       set head_offset = v_head, last_created_at = v_created, last_activity = now(),
           segment_first = v_seg_first, segment_started_at = v_seg_started,
           first_offset = least(first_offset, v_part.head_offset + 1)
     where id = p_partition_id;
  end if;
end
$$;

