create or replace function queen.log_append_v1(p_partition_id uuid, p_items jsonb, p_producer_sub text)
returns table (r_ord bigint, r_status text, r_message_id uuid, r_offset bigint, r_transaction_id text, r_created_at timestamptz)
language plpgsql set enable_seqscan = off as $$
declare
  v_part        queen.partitions%rowtype;
  v_created     timestamptz;
  v_status      text[];
  v_ids         uuid[];
  v_offsets     bigint[];
  v_txids       text[];
  v_created_ats timestamptz[];
  v_new         bigint;
  v_with_txid   bigint;
  v_distinct    text[];
  v_all         text[];
  v_done        boolean := false;
  v_tries       int;
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

  -- The items' transactionIds by one jsonpath pass over the request (no
  -- row per item); a push without any (the common one) sorts nothing.
  v_all := array(select jsonb_array_elements_text(jsonb_path_query_array(p_items, '$[*].transaction_id ? (@ != null)')));
  v_with_txid := cardinality(v_all);
  -- Items with transactionIds are appended as all new, optimistically, and
  -- the unique index on (partition, transactionId) checks them on the way
  -- in: one lookup each fewer than asking first. A unique violation (an
  -- item repeats a retained message or an earlier item) undoes the attempt
  -- (a subtransaction) and the request goes the careful way below. Not for
  -- a transactionId spelled like a message id (it may name a message pushed
  -- without one, which the index does not hold), and at most
  -- 32 times per transaction: a backend keeps the ids of 64
  -- subtransactions in shared memory, and past that every other session's
  -- visibility checks get slower until it commits.
  v_tries := coalesce(nullif(current_setting('queen.optimistic_appends', true), ''), '0')::int;
  if v_with_txid > 0 and v_tries < 32
     and not exists (select 1 from unnest(v_all) t where queen.id_offset(t) is not null) then
    perform set_config('queen.optimistic_appends', (v_tries + 1)::text, true);
    begin
      select array_agg(i.msg_offset order by i.msg_offset), array_agg(i.id order by i.msg_offset), array_agg(i.transaction_id order by i.msg_offset)
        into v_offsets, v_ids, v_txids
        from queen.log_insert_new_v1(p_partition_id, p_items, v_part.head_offset, v_created, v_tail, p_producer_sub) i;
      v_done := true;
    exception when unique_violation then
      v_done := false;
    end;
  end if;
  if v_with_txid > 0 and not v_done then
    -- Retained duplicates of the items' distinct transactionIds (see
    -- queen.log_retained_duplicates_v1: one index lookup each, whatever the
    -- statistics say).
    v_distinct := array(select distinct t from unnest(v_all) t);
    select coalesce(array_agg(d.txid), '{}'), coalesce(array_agg(d.id), '{}'),
           coalesce(array_agg(d.msg_offset), '{}'), coalesce(array_agg(d.created_at), '{}')
      into v_dup_txids, v_dup_ids, v_dup_offsets, v_dup_created
      from queen.log_retained_duplicates_v1(p_partition_id, v_distinct) d;
  end if;

  if v_done then
    v_new := cardinality(v_offsets);
    return query select u.off - v_part.head_offset, 'queued'::text, u.id, u.off, u.txid, v_created
                   from unnest(v_offsets, v_ids, v_txids) as u(off, id, txid);
  elsif v_with_txid = cardinality(coalesce(v_distinct, '{}')) and cardinality(v_dup_txids) = 0 then
    -- Every item is new (the common case): offset head+ord for item ord,
    -- straight from the input into the table.
    return query
    select i.msg_offset - v_part.head_offset, 'queued'::text, i.id, i.msg_offset, i.transaction_id, v_created
      from queen.log_insert_new_v1(p_partition_id, p_items, v_part.head_offset, v_created, v_tail, p_producer_sub) i;
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
    perform queen.log_append_advance_v1(v_part, v_new, v_created);
  end if;
end
$$;
