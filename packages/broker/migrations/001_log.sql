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
  transaction_id  text,             -- the client's; null: the wire transactionId is id::text
  trace_id        uuid,
  payload         jsonb,
  encrypted       bytea,
  producer_sub    text,
  created_at      timestamptz not null,
  primary key (partition_id, msg_offset)
);
-- Dedup key while retained; probed under the append lock, enforced here too.
-- Only transactionIds a client chose are stored and indexed: a message pushed
-- without one answers to its id (queen.message_offset_v1 decodes the offset
-- from it), which spares every such message a text copy of its id and an
-- index entry (bench: ~40 % more rows per second at batch 100).
create unique index messages_transaction_id on queen.messages (partition_id, transaction_id) where transaction_id is not null;

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
-- increase with offset inside a partition even when several share a
-- millisecond; the last 32 bits (tail) are random and keep ids of different
-- partitions apart. An append draws one tail for its whole run (the offset
-- bits already differ): gen_random_uuid() costs ~4 µs a call here, more than
-- the rest of the id.
-- Stable, not immutable: extract() from a timestamptz is stable, and a body
-- more volatile than its declaration stops the planner inlining the call
-- (a separate SQL-function execution per message).
create function queen.uuid_v7(ts timestamptz, seq bigint, tail bytea) returns uuid
language sql stable parallel safe as $$
  select encode(
    substring(int8send(floor(extract(epoch from ts) * 1000)::bigint) from 3)
    || int2send((28672 | ((seq >> 30) & 4095))::int2)
    || substring(int8send(2147483648 | (seq & 1073741823)) from 5)
    || tail,
    'hex')::uuid
$$;

create function queen.uuid_v7(ts timestamptz, seq bigint) returns uuid
language sql volatile as $$
  select queen.uuid_v7(ts, seq, substring(uuid_send(gen_random_uuid()) from 1 for 4))
$$;

-- The offset a message id (a queen.uuid_v7 as text) carries; null for any
-- other text.
create function queen.id_offset(p_id text) returns bigint
language sql immutable parallel safe as $$
  select case when p_id ~* '^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$' then
    (select ((get_byte(b, 6) & 15)::bigint << 38) | (get_byte(b, 7)::bigint << 30) | ((get_byte(b, 8) & 63)::bigint << 24)
          | (get_byte(b, 9)::bigint << 16) | (get_byte(b, 10)::bigint << 8) | get_byte(b, 11)::bigint
       from uuid_send(p_id::uuid) as b)
  end
$$;

-- The offset of the retained message a wire transactionId names in a
-- partition, or null: a client-chosen transactionId through the dedup index,
-- else the id of a message pushed without one through the primary key.
-- Both are single index lookups whatever the statistics.
create function queen.message_offset_v1(p_partition_id uuid, p_transaction_id text) returns bigint
language sql stable parallel safe as $$
  select coalesce(
    (select m.msg_offset from queen.messages m
      where m.partition_id = p_partition_id and m.transaction_id = p_transaction_id),
    (select m.msg_offset from queen.messages m
      where m.partition_id = p_partition_id and m.msg_offset = queen.id_offset(p_transaction_id)
        and m.transaction_id is null and m.id::text = lower(p_transaction_id)))
$$;

create function queen.setting_int(name text, fallback int) returns int
language sql stable as $$
  select coalesce(nullif(current_setting(name, true), '')::int, fallback)
$$;

-- THE allocator core: appends a run of items to ONE partition, set-based.
-- Locks the partition row (the append lock, held to commit), probes dedup
-- (first occurrence in the request wins, then the retained messages),
-- allocates head+1.. in item order, writes the messages and segment
-- bookkeeping, and updates the partition row once. The items of one call
-- share a createdAt. No NOTIFY here: a transaction that notifies takes
-- PostgreSQL's global notify lock at commit and holds it through the WAL
-- flush, which serialises every pushing commit; brokers publish wake-ups
-- after commit instead (notifier.ts). Every write path reaches it through log_push_one_v1 or
-- log_push_many_v1; nothing else allocates offsets.
-- items: [{payload, transaction_id?, trace_id?, encrypted? (base64)}]
-- Answers one row per item (r_ord = its position). r_transaction_id is the
-- item's own, null when it gave none: only log_push_one_v1 needs the wire
-- form (the id), so batch pushes do not format an id per row for nothing.
create function queen.log_append_v1(p_partition_id uuid, p_items jsonb, p_producer_sub text)
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

-- THE allocator entry point of PROTOCOL §8 for one message: push,
-- transaction, stream cycle sink pushes and timer fires all append through
-- here (or through log_push_many_v1, the same core for a whole request).
create function queen.log_push_one_v1(
  p_partition_id uuid, p_payload jsonb, p_transaction_id text, p_trace_id uuid,
  p_producer_sub text, p_is_encrypted boolean, p_encrypted bytea default null
) returns jsonb
language sql as $$
  select jsonb_build_object('status', a.r_status, 'message_id', a.r_message_id, 'partition_id', p_partition_id,
           'offset', a.r_offset::text, 'created_at', queen.iso(a.r_created_at), 'transaction_id', coalesce(a.r_transaction_id, a.r_message_id::text),
           'queue_name', p.queue_name, 'partition_name', p.name)
    from queen.log_append_v1(p_partition_id,
           jsonb_build_array(jsonb_build_object('payload', p_payload, 'transaction_id', p_transaction_id, 'trace_id', p_trace_id)
             || case when p_is_encrypted then jsonb_build_object('encrypted', encode(p_encrypted, 'base64')) else '{}'::jsonb end),
           p_producer_sub) a,
         queen.partitions p
   where p.id = p_partition_id
$$;

-- A whole push request: append locks of every target partition in ascending
-- id order first (PROTOCOL §4 rank 4), then each partition's run appended in
-- item order; results come back in input order.
-- items: [{partition_id, payload, transaction_id?, trace_id?, encrypted?}]
-- Answers only what the caller cannot know: status, message id and offset.
-- The partition, queue and transactionId (the item's, else the message id)
-- are the caller's own input, and sending them back on every row was text the
-- database wrote and the broker parsed for nothing.
create function queen.log_push_many_v1(p_items jsonb, p_producer_sub text)
returns table (status text, message_id uuid, "offset" bigint)
language plpgsql as $$
declare
  v_pids uuid[];
begin
  select array_agg(distinct (e->>'partition_id')::uuid) into v_pids from jsonb_array_elements(p_items) e;
  perform 1 from queen.partitions where id = any(v_pids) order by id for update;
  if cardinality(v_pids) = 1 then
    -- One partition (the usual push): the request is its run as it stands.
    return query
    select a.r_status, a.r_message_id, a.r_offset
      from queen.log_append_v1(v_pids[1], p_items, p_producer_sub) a
     order by a.r_ord;
    return;
  end if;
  -- Each partition's run is appended once; each result row goes back to its
  -- input position through the run's ords (an int8 array: O(1) subscripts,
  -- so a 10k-item request stays linear).
  return query
  with items as (
    select x.ord, (x.e->>'partition_id')::uuid as pid, x.e
      from jsonb_array_elements(p_items) with ordinality as x(e, ord)
  ),
  runs as materialized (
    select i.pid, array_agg(i.ord order by i.ord) as ords, jsonb_agg(i.e order by i.ord) as run
      from items i
     group by i.pid
  )
  select a.r_status, a.r_message_id, a.r_offset
    from runs r cross join lateral queen.log_append_v1(r.pid, r.run, p_producer_sub) a
   order by r.ords[a.r_ord];
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
