-- The ack of items that all say completed (jsonb, as the broker sends any
-- ack that is not one pop's run): one cursor move per partition instead of
-- the walk's one per item. Answers the compact {offsets, released, names}
-- that the broker expands into per-item results (log/ack.ts), or null when
-- the request is off this path: an item failed, retried or dead-lettered,
-- an unknown message, a repeat, an item its lease does not cover. Null means
-- nothing was written (only cursor rows locked), and queen.log_ack_v2 hands
-- the request to queen.log_ack_walk_v1, which answers item by item.
create or replace function queen.log_ack_completed_v1(p_group text, p_items jsonb) returns jsonb
language plpgsql set enable_seqscan = off as $$
declare
  v_txid     text[];
  v_pid      uuid[];
  v_lease    uuid[];
  v_given    bigint[];
  v_off      bigint[];
  v_pids     uuid[];
  v_plain    boolean;
  v_found    boolean;
  v_fast     boolean;
  v_map      jsonb;
  v_out      jsonb;
  v_cur      queen.cursors%rowtype;
  -- The one item whose move ends a live lease: the first to reach its last offset.
  v_released bigint;
begin
  select array_agg(i."transactionId" order by i.n), array_agg(i."partitionId" order by i.n),
         array_agg(i."leaseId" order by i.n), array_agg(i."offset" order by i.n),
         bool_and(coalesce(i.status, 'completed') in ('completed', 'success')), array_agg(distinct i."partitionId")
    into v_txid, v_pid, v_lease, v_given, v_plain, v_pids
    from rows from (jsonb_to_recordset(p_items) as ("transactionId" text, "partitionId" uuid, "leaseId" uuid, "offset" bigint, status text))
         with ordinality as i("transactionId", "partitionId", "leaseId", "offset", status, n);
  if not coalesce(v_plain, false) then
    return null;
  end if;

  -- Which messages. When every item names its offset (our client sends what
  -- the pop answered), the item's transactionId must be the one stored at
  -- that offset, which decides: the items of one pop by the run check, others
  -- by one primary-key probe per item.
  if array_position(v_given, null) is null then
    v_found := cardinality(v_pids) = 1 and queen.log_ack_run_holds_v1(v_pids[1], v_given, v_txid);
    if v_found then
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
    -- and the items are looked up in it, instead of two index probes per
    -- item. A map, not a join: the planner sizes unnested arrays at a handful
    -- of rows, and a 10,000-item ack planned as a nested loop took seconds.
    -- Anything not found that way (no leaseId, a lease gone, an id spelled
    -- otherwise) is resolved one by one, as the walk would.
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
      into v_off, v_found
      from unnest(v_pid, v_txid) with ordinality as i(pid, txid, n);
    if not coalesce(v_found, false) then
      select array_agg(o.msg_offset order by o.ord), bool_and(o.msg_offset is not null)
        into v_off, v_found
        from queen.message_offsets_v1(v_pid, v_txid) o;
      if not v_found then
        return null;
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
      return null;
    end if;
    select count(distinct i.off) = count(*)
           and bool_and(queen.log_ack_fence_v1(i.off, i.lease, v_cur.cursor_offset, v_cur.lease_id, v_cur.lease_expires_at, v_cur.lease_last_offset, false) is null),
           min(i.off) filter (where v_cur.lease_id is not null and i.off >= v_cur.lease_last_offset)
      into v_fast, v_released
      from unnest(v_off, v_lease) as i(off, lease);
    if not coalesce(v_fast, false) then
      return null;
    end if;
    v_out := jsonb_build_object(
      'offsets', to_jsonb(v_off::text[]),
      'released', to_jsonb(array(select coalesce(o.off = v_released, false) from unnest(v_off) with ordinality as o(off, n) order by o.n)),
      'names', (select jsonb_object_agg(p.id, jsonb_build_array(p.queue_name, p.name)) from queen.partitions p where p.id = v_pids[1]));
    perform queen.log_ack_move_v1(p_group, v_pid, v_off);
    return v_out;
  end if;

  -- In one pass over the items joined to their cursor rows as found: whether
  -- every item passes the fence and none repeats another (else the walk
  -- decides item by item), and the answer, compact: every item succeeded,
  -- so what differs per item is its offset and whether its cursor move
  -- ended the lease (the item reaching the lease's last offset, as in the
  -- walk).
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
    return null;
  end if;

  perform queen.log_ack_move_v1(p_group, v_pid, v_off);
  return v_out;
end
$$;
