-- The log: queues, partitions, immutable messages grouped into segments,
-- per-(partition, group) cursors with leases, failure counts and the DLQ.
-- Message rows are written once by queen.log_push_one_v1 and deleted only by
-- retention (whole segments) or queue delete: pop, ack, lease and DLQ write
-- cursor, failure and DLQ rows only.

create schema if not exists queen;

create table queen.queues (
  id          uuid primary key default gen_random_uuid(),
  name        text not null unique,
  namespace   text,
  task        text,
  options     jsonb not null default '{}'::jsonb,
  created_at  timestamptz not null default now(),
  updated_at  timestamptz not null default now()
);

create table queen.partitions (
  id                  uuid primary key default gen_random_uuid(),
  queue_id            uuid not null references queen.queues(id) on delete cascade,
  queue_name          text not null,
  name                text not null,
  head_offset         bigint not null default 0,   -- last allocated offset
  first_offset        bigint not null default 1,   -- lowest retained offset (head+1 when empty)
  last_created_at     timestamptz,                 -- createdAt of the head message: the clamp for the next one
  segment_first       bigint,                      -- first offset of the open segment, null when none is open
  segment_started_at  timestamptz,
  created_at          timestamptz not null default now(),
  last_activity       timestamptz not null default now(),
  unique (queue_id, name)
);

create table queen.messages (
  partition_id    uuid not null,
  msg_offset      bigint not null,
  id              uuid not null,
  transaction_id  text not null,
  trace_id        uuid,
  payload         jsonb,
  encrypted       bytea,
  producer_sub    text,
  created_at      timestamptz not null,
  primary key (partition_id, msg_offset)
);
-- Dedup key while retained; probed under the append lock, enforced here too.
create unique index messages_transaction_id on queen.messages (partition_id, transaction_id);

create table queen.log_segments (
  partition_id      uuid not null,
  first_offset      bigint not null,
  last_offset       bigint not null,
  first_created_at  timestamptz not null,
  last_created_at   timestamptz not null,
  sealed            boolean not null default false,
  primary key (partition_id, first_offset)
);

create table queen.cursors (
  partition_id       uuid not null references queen.partitions(id) on delete cascade,
  consumer_group     text not null,
  cursor_offset      bigint not null default 0,
  lease_id           uuid,
  lease_expires_at   timestamptz,
  lease_last_offset  bigint,
  last_consumed_at   timestamptz,
  last_acked_at      timestamptz,
  created_at         timestamptz not null default now(),
  primary key (partition_id, consumer_group)
);
create index cursors_lease_id on queen.cursors (lease_id) where lease_id is not null;

-- Failed deliveries per (message, group); rows at or below the cursor are discarded.
create table queen.failures (
  partition_id    uuid not null,
  consumer_group  text not null,
  msg_offset      bigint not null,
  retry_count     int not null,
  primary key (partition_id, consumer_group, msg_offset)
);

create table queen.dlq (
  id              bigserial primary key,
  partition_id    uuid not null,
  consumer_group  text not null,
  msg_offset      bigint not null,
  error_message   text,
  retry_count     int not null,
  failed_at       timestamptz not null default now(),
  unique (partition_id, consumer_group, msg_offset)
);

-- Subscription start of a named group on a queue, fixed at its first pop (PROTOCOL §3.6).
create table queen.subscriptions (
  consumer_group  text not null,
  queue_id        uuid not null references queen.queues(id) on delete cascade,
  mode            text not null,
  start_at        timestamptz,          -- null = from the beginning
  created_at      timestamptz not null default now(),
  primary key (consumer_group, queue_id)
);

create table queen.flags (
  name   text primary key,
  value  jsonb not null
);

-- ISO-8601 UTC with microseconds, the wire format of every time the broker sends.
create function queen.iso(ts timestamptz) returns text
language sql immutable parallel safe as $$
  select to_char(ts at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
$$;

-- UUIDv7 whose 42 bits after the timestamp carry the offset, so ids strictly
-- increase with offset inside a partition even when several share a millisecond;
-- the last 32 bits are random and keep ids of different partitions apart.
create function queen.uuid_v7(ts timestamptz, seq bigint) returns uuid
language sql volatile as $$
  select encode(
    substring(int8send(floor(extract(epoch from ts) * 1000)::bigint) from 3)
    || int2send((28672 | ((seq >> 30) & 4095))::int2)
    || substring(int8send(2147483648 | (seq & 1073741823)) from 5)
    || substring(uuid_send(gen_random_uuid()) from 1 for 4),
    'hex')::uuid
$$;

create function queen.setting_int(name text, fallback int) returns int
language sql stable as $$
  select coalesce(nullif(current_setting(name, true), '')::int, fallback)
$$;

-- THE allocator (PROTOCOL §8): every write path (push, transaction, stream
-- cycle, timer fire) appends through here. Locks the partition row (the append
-- lock, held to commit), probes dedup, allocates head+1, writes the message and
-- the segment bookkeeping, and queues a NOTIFY that wakes long-polls on commit.
create function queen.log_push_one_v1(
  p_partition_id uuid, p_payload jsonb, p_transaction_id text, p_trace_id uuid,
  p_producer_sub text, p_is_encrypted boolean, p_encrypted bytea default null
) returns jsonb
language plpgsql as $$
declare
  v_part     queen.partitions%rowtype;
  v_dup      record;
  v_offset   bigint;
  v_created  timestamptz;
  v_id       uuid;
  v_txid     text;
  v_extended boolean;
  v_max_msgs int := queen.setting_int('queen.segment_max_messages', 10000);
  v_max_age  int := queen.setting_int('queen.segment_max_age_s', 3600);
begin
  select * into v_part from queen.partitions where id = p_partition_id for update;
  if not found then
    raise exception 'partition % does not exist', p_partition_id using errcode = 'P0002';
  end if;

  if p_transaction_id is not null then
    select m.id, m.msg_offset, m.created_at into v_dup
      from queen.messages m
     where m.partition_id = p_partition_id and m.transaction_id = p_transaction_id;
    if found then
      return jsonb_build_object('status', 'duplicate', 'message_id', v_dup.id, 'partition_id', p_partition_id,
        'offset', v_dup.msg_offset::text, 'created_at', queen.iso(v_dup.created_at), 'transaction_id', p_transaction_id,
        'queue_name', v_part.queue_name, 'partition_name', v_part.name);
    end if;
  end if;

  v_offset  := v_part.head_offset + 1;
  v_created := greatest(clock_timestamp(), coalesce(v_part.last_created_at, '-infinity'::timestamptz));
  v_id      := queen.uuid_v7(v_created, v_offset);
  v_txid    := coalesce(p_transaction_id, v_id::text);

  insert into queen.messages (partition_id, msg_offset, id, transaction_id, trace_id, payload, encrypted, producer_sub, created_at)
  values (p_partition_id, v_offset, v_id, v_txid, p_trace_id,
          case when p_is_encrypted then null else p_payload end,
          case when p_is_encrypted then p_encrypted else null end,
          p_producer_sub, v_created);

  -- Extend the open segment; open a new one when none is open, the open one
  -- is full or old, or retention dropped it (an open segment may be dropped,
  -- the next push opens a new one: PROTOCOL §3.1).
  v_extended := false;
  if v_part.segment_first is not null
     and v_offset - v_part.segment_first < v_max_msgs
     and v_created - v_part.segment_started_at < make_interval(secs => v_max_age) then
    update queen.log_segments set last_offset = v_offset, last_created_at = v_created
     where partition_id = p_partition_id and first_offset = v_part.segment_first;
    v_extended := found;
  end if;

  if v_extended then
    update queen.partitions set head_offset = v_offset, last_created_at = v_created, last_activity = now()
     where id = p_partition_id;
  else
    update queen.log_segments set sealed = true
     where partition_id = p_partition_id and first_offset = v_part.segment_first;
    insert into queen.log_segments (partition_id, first_offset, last_offset, first_created_at, last_created_at)
    values (p_partition_id, v_offset, v_offset, v_created, v_created);
    update queen.partitions
       set head_offset = v_offset, last_created_at = v_created, last_activity = now(),
           segment_first = v_offset, segment_started_at = v_created,
           first_offset = least(first_offset, v_offset)
     where id = p_partition_id;
  end if;

  -- Identical notifications in one transaction collapse into one at commit.
  perform pg_notify('queen_push', v_part.queue_name);

  return jsonb_build_object('status', 'queued', 'message_id', v_id, 'partition_id', p_partition_id,
    'offset', v_offset::text, 'created_at', queen.iso(v_created), 'transaction_id', v_txid,
    'queue_name', v_part.queue_name, 'partition_name', v_part.name);
end
$$;

-- A whole push request: append locks of every target partition in ascending
-- id order first (PROTOCOL §4 rank 4), then offsets allocated in item order.
-- items: [{partition_id, payload, transaction_id?, trace_id?, encrypted?}]
create function queen.log_push_many_v1(p_items jsonb, p_producer_sub text) returns jsonb
language plpgsql as $$
declare
  -- Results collect in a plpgsql array (appended in place) and become JSON
  -- once: growing a jsonb value item by item copies it each time (quadratic).
  v_out  jsonb[] := '{}';
  v_item jsonb;
begin
  perform 1 from queen.partitions
   where id in (select (e->>'partition_id')::uuid from jsonb_array_elements(p_items) e)
   order by id for update;
  for v_item in select e from jsonb_array_elements(p_items) e loop
    v_out := array_append(v_out, queen.log_push_one_v1(
      (v_item->>'partition_id')::uuid, v_item->'payload', v_item->>'transaction_id',
      (v_item->>'trace_id')::uuid, p_producer_sub, v_item ? 'encrypted',
      case when v_item ? 'encrypted' then decode(v_item->>'encrypted', 'base64') end));
  end loop;
  return to_jsonb(v_out);
end
$$;

-- Creates missing queues and partitions (committed on its own, before the main
-- transaction, PROTOCOL §4) and answers the partition ids. targets: [{queue, partition}]
create function queen.ensure_partitions_v1(p_targets jsonb)
returns table (queue_name text, partition_name text, partition_id uuid, queue_id uuid)
language plpgsql as $$
#variable_conflict use_column
begin
  insert into queen.queues (name, namespace, task)
  select distinct t->>'queue', split_part(t->>'queue', '.', 1), nullif(split_part(t->>'queue', '.', 2), '')
    from jsonb_array_elements(p_targets) t
  on conflict (name) do nothing;

  insert into queen.partitions (queue_id, queue_name, name)
  select distinct q.id, q.name, t->>'partition'
    from jsonb_array_elements(p_targets) t join queen.queues q on q.name = t->>'queue'
  on conflict (queue_id, name) do nothing;

  return query
  select q.name, p.name, p.id, q.id
    from (select distinct t->>'queue' as qn, t->>'partition' as pn from jsonb_array_elements(p_targets) t) t
    join queen.queues q on q.name = t.qn
    join queen.partitions p on p.queue_id = q.id and p.name = t.pn;
end
$$;

-- Advancing by K (PROTOCOL §3.3): the K-th retained offset after p_from,
-- walking the real segment ranges so offsets removed by retention are skipped,
-- never counted. Null when fewer than K retained messages follow p_from.
create function queen.log_advance_v1(p_partition_id uuid, p_from bigint, p_k bigint) returns bigint
language plpgsql stable as $$
declare
  v_seg       record;
  v_remaining bigint := p_k;
  v_start     bigint;
  v_span      bigint;
begin
  if p_k < 1 then return null; end if;
  for v_seg in
    select first_offset, last_offset from queen.log_segments
     where partition_id = p_partition_id and last_offset > p_from
     order by first_offset
  loop
    v_start := greatest(v_seg.first_offset, p_from + 1);
    v_span  := v_seg.last_offset - v_start + 1;
    if v_span >= v_remaining then
      return v_start + v_remaining - 1;
    end if;
    v_remaining := v_remaining - v_span;
  end loop;
  return null;
end
$$;

-- Where a (partition, group) cursor starts the first time the group touches
-- the partition: the greatest offset created at or before the subscription
-- start ("0" for the beginning and for queue mode).
create function queen.log_cursor_start_v1(p_partition_id uuid, p_group text) returns bigint
language plpgsql stable as $$
declare
  v_start timestamptz;
begin
  select s.start_at into v_start
    from queen.subscriptions s join queen.partitions p on p.queue_id = s.queue_id
   where p.id = p_partition_id and s.consumer_group = p_group;
  if v_start is null then return 0; end if;
  return coalesce((select max(msg_offset) from queen.messages
                    where partition_id = p_partition_id and created_at <= v_start), 0);
end
$$;
