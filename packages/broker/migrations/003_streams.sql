-- Streams (PROTOCOL §7, §8): registered queries and their state rows, and the
-- cycle procedure that commits state ops, sink pushes and the source ack in
-- one transaction. State rows have no FK to queen.partitions on purpose:
-- retention and partition cleanup must never delete stream state (a surviving
-- row vetoes the partition's cleanup instead).

create schema if not exists queen_streams;

create table queen_streams.queries (
  query_id     uuid primary key default gen_random_uuid(),
  name         text not null unique,
  source_queue text not null,
  sink_queue   text,
  config_hash  text not null,
  created_at   timestamptz not null default now(),
  updated_at   timestamptz not null default now()
);

-- Versions come from one sequence: strictly increasing per write and never
-- reused for a key, even across delete and re-create, so a compare-and-set on
-- a version read before a delete can never match the re-created row.
create sequence queen_streams.state_version_seq;

create table queen_streams.state (
  query_id      uuid not null references queen_streams.queries(query_id),
  partition_id  uuid not null,
  -- C collation: state/get answers in bytewise key order, and the primary key
  -- index serves both that order and literal prefix ranges.
  key           text collate "C" not null,
  value         jsonb,
  version       bigint not null,
  updated_at    timestamptz not null default now(),
  primary key (query_id, partition_id, key)
);
-- Partition cleanup asks "does any state row reference this partition?".
create index state_partition on queen_streams.state (partition_id);

-- An element failure: raised inside the element's savepoint and caught there.
-- message = catalogue code, detail = human text, hint = extra JSON fields.
create function queen_streams.fail(p_code text, p_error text, p_extra jsonb default '{}'::jsonb) returns void
language plpgsql as $$
begin
  raise exception using errcode = 'QS001', message = p_code, detail = p_error, hint = p_extra::text;
end
$$;

-- One cycle element (PROTOCOL §7.4), run inside the caller's savepoint. Order:
-- query row FOR KEY SHARE → shard advisory lock → state ops in array order →
-- sink pushes (append locks ascending, queen.log_push_one_v1) → source ack.
-- Any failure raises QS001 and the savepoint undoes everything of the element.
create function queen_streams.apply_element(p_el jsonb) returns jsonb
language plpgsql as $$
declare
  v_qid        uuid := (p_el->>'query_id')::uuid;
  v_pid        uuid := (p_el->>'partition_id')::uuid;
  v_group      text := coalesce(p_el->>'consumer_group', '__QUEUE_MODE__');
  v_sub        text := p_el->>'producer_sub';
  v_op         jsonb;
  v_key        text;
  v_expected   bigint;
  v_current    bigint;
  v_version    bigint;
  v_applied    int := 0;
  v_state_res  jsonb := '[]'::jsonb;
  v_push_res   jsonb := '[]'::jsonb;
  v_item       jsonb;
  v_target     uuid;
  v_pushed     jsonb;
  v_idx        int := 0;
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
  for v_op in select e from jsonb_array_elements(coalesce(p_el->'state_ops', '[]'::jsonb)) e loop
    v_key := v_op->>'key';
    v_expected := (v_op->>'expected_version')::bigint;
    select s.version into v_current from queen_streams.state s
     where s.query_id = v_qid and s.partition_id = v_pid and s.key = v_key
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
      values (v_qid, v_pid, v_key, coalesce(v_op->'value', 'null'::jsonb), v_version, now())
      on conflict (query_id, partition_id, key)
      do update set value = excluded.value, version = excluded.version, updated_at = excluded.updated_at;
      v_state_res := v_state_res || jsonb_build_array(jsonb_build_object('key', v_key, 'type', 'upsert', 'version', v_version));
    elsif v_op->>'type' = 'delete' then
      delete from queen_streams.state s where s.query_id = v_qid and s.partition_id = v_pid and s.key = v_key;
      v_state_res := v_state_res || jsonb_build_array(jsonb_build_object('key', v_key, 'type', 'delete', 'version', null));
    else
      raise exception 'unknown state op type %', v_op->>'type' using errcode = '22023';
    end if;
    v_applied := v_applied + 1;
  end loop;

  -- Sink pushes (rank 4): every target's append lock in ascending id order, then
  -- the one allocator in item order. The route ensured the partitions exist in
  -- its own statement before this transaction; a raw caller may name them.
  if jsonb_array_length(coalesce(p_el->'push_items', '[]'::jsonb)) > 0 then
    perform 1 from queen.partitions p
     where p.id in (select (e->>'partition_id')::uuid from jsonb_array_elements(p_el->'push_items') e)
     order by p.id for update;
    for v_item in select e from jsonb_array_elements(p_el->'push_items') e loop
      v_target := (v_item->>'partition_id')::uuid;
      if v_target is null then
        select p.id into v_target from queen.partitions p
         where p.queue_name = v_item->>'queue' and p.name = coalesce(v_item->>'partition', 'Default');
        if v_target is null then
          raise exception 'partition %/% does not exist', v_item->>'queue', coalesce(v_item->>'partition', 'Default')
            using errcode = 'P0002';
        end if;
        perform 1 from queen.partitions p where p.id = v_target for update;
      end if;
      -- `encrypted` (base64) is set by the broker for sink queues with encryptionEnabled.
      v_pushed := queen.log_push_one_v1(v_target, coalesce(v_item->'payload', 'null'::jsonb), v_item->>'transactionId',
        (v_item->>'traceId')::uuid, v_sub, v_item ? 'encrypted',
        case when v_item ? 'encrypted' then decode(v_item->>'encrypted', 'base64') end);
      v_push_res := v_push_res || jsonb_build_array(jsonb_build_object(
        'index', v_idx, 'transaction_id', v_pushed->>'transaction_id', 'status', v_pushed->>'status',
        'message_id', v_pushed->>'message_id', 'partition_id', v_pushed->>'partition_id',
        'queueName', v_pushed->>'queue_name', 'offset', v_pushed->>'offset')
        || case when v_pushed->>'status' = 'queued' then jsonb_build_object('trace_id', v_item->'traceId') else '{}'::jsonb end);
      v_idx := v_idx + 1;
    end loop;
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

-- PROTOCOL §8: an array of cycle elements (each with idx), each in its own
-- savepoint: a failing element rolls back alone, the others commit. Every
-- rank-3 lock of every element is taken up front in ascending order before any
-- write, so a multi-element call keeps the total lock order of §4.
-- Answers [{idx, result}] with result as §7.4.
create function queen.log_streams_cycle_v1(p_elements jsonb) returns jsonb
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
        'push_results', '[]'::jsonb, 'ack_result', null, 'error', v_error, 'code', v_code)
        || coalesce(nullif(v_extra, '')::jsonb, '{}'::jsonb);
    end;
    v_out := v_out || jsonb_build_array(jsonb_build_object('idx', v_el->'idx', 'result', v_res));
  end loop;
  return v_out;
end
$$;
