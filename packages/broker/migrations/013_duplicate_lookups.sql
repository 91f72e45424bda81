-- Duplicate lookups that stay index lookups (issue 12). A push's items
-- are checked against the partition's retained messages by transactionId.
-- 006 did that, for more than eight ids (every stream sink push), with one
-- index scan over `transaction_id = any(ids)`. The planner may instead read
-- the partition through the primary key and filter, when its statistics say
-- the partition is small: a young table, or one sink partition among many
-- small ones. Measured on a map stream whose sink had grown since the last
-- ANALYZE, that read every message of the sink partition on every cycle and
-- PostgreSQL's CPU per message doubled (63 to 137 µs over six runs).
--
-- queen.log_retained_duplicates_v1 looks each id up on its own, as a
-- lateral subquery with LIMIT 1 that the planner cannot flatten into a
-- join: a full-key equality on a unique index is planned as that index
-- lookup whatever the statistics say. With good statistics it costs about
-- 1.6 µs more per id than the single scan (500 ids: 2.6 ms against 1.7,
-- p25 of 200, a partition of 20,500 messages); it never reads the partition.
-- A chosen transactionId wins over a broker id spelled the same, as in
-- queen.message_offset_v1.
create function queen.log_retained_duplicates_v1(p_partition_id uuid, p_txids text[])
returns table (txid text, id uuid, msg_offset bigint, created_at timestamptz)
language sql stable as $$
  select distinct on (u.txid) u.txid, u.id, u.msg_offset, u.created_at
    from (select t.txid, m.id, m.msg_offset, m.created_at, 0 as pref
            from unnest(p_txids) t(txid)
            cross join lateral (select m.id, m.msg_offset, m.created_at from queen.messages m
                                 where m.partition_id = p_partition_id and m.transaction_id = t.txid limit 1) m
          union all
          -- Only ids spelled as a message id can name one pushed without a transactionId.
          select t.txid, m.id, m.msg_offset, m.created_at, 1
            from (select x.txid, queen.id_offset(x.txid) as off from unnest(p_txids) x(txid)) t
            cross join lateral (select m.id, m.msg_offset, m.created_at from queen.messages m
                                 where m.partition_id = p_partition_id and m.msg_offset = t.off
                                   and m.transaction_id is null and m.id::text = lower(t.txid) limit 1) m
           where t.off is not null) u
   order by u.txid, u.pref
$$;

-- The allocator of 010, with one change: the retained duplicates come from
-- the function above, for any number of ids. Dedup, offsets, segments,
-- trace context and the answer are as they were.
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
  v_with_txid   bigint;
  v_distinct    text[];
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

  -- Retained duplicates of the items' distinct transactionIds (see
  -- queen.log_retained_duplicates_v1: one index lookup each, whatever the
  -- statistics say).
  select count(e->>'transaction_id'), array_agg(distinct e->>'transaction_id') filter (where e->>'transaction_id' is not null)
    into v_with_txid, v_distinct
    from jsonb_array_elements(p_items) e;
  if v_distinct is not null then
    select coalesce(array_agg(d.txid), '{}'), coalesce(array_agg(d.id), '{}'),
           coalesce(array_agg(d.msg_offset), '{}'), coalesce(array_agg(d.created_at), '{}')
      into v_dup_txids, v_dup_ids, v_dup_offsets, v_dup_created
      from queen.log_retained_duplicates_v1(p_partition_id, v_distinct) d;
  end if;

  if v_with_txid = cardinality(coalesce(v_distinct, '{}')) and cardinality(v_dup_txids) = 0 then
    -- Every item is new (the common case): offset head+ord for item ord,
    -- straight from the input into the table.
    return query
    with ins as (
      insert into queen.messages (partition_id, msg_offset, id, transaction_id, trace_id, traceparent, payload, encrypted, producer_sub, created_at)
      select p_partition_id, v_part.head_offset + x.ord, x.id, x.e->>'transaction_id', (x.e->>'trace_id')::uuid, x.e->>'traceparent',
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
             x.e->>'traceparent' as traceparent,
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
      insert into queen.messages (partition_id, msg_offset, id, transaction_id, trace_id, traceparent, payload, encrypted, producer_sub, created_at)
      select p_partition_id, off, new_id, txid, trace_id, traceparent,
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
