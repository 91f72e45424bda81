-- The ack a consumer sends after a pop, in one call without jsonb (issue 12).
-- Such an ack names one partition, one lease (or none), every item completed
-- and with the offset the pop answered. queen.log_ack_v1 takes it as jsonb
-- and reads it into arrays (jsonb_to_recordset, eight array_aggs), then
-- checks, locks and moves through three more calls: about 0.8 ms of
-- PostgreSQL for 100 items in the end-to-end bench (pg_stat_statements),
-- against about 0.3 ms for the wire floor's claim and release together.
-- The broker recognises this ack (ack.ts) and passes its offsets and
-- transaction ids as arrays.
--
-- The checks are log_ack_v1's, item for item, stated over the whole run:
--   * every offset holds the message the item names (its transactionId,
--     or the message id when it had none): one index range scan of the
--     run's offsets, read into an array by position;
--   * no offset repeats;
--   * the cursor row exists and is locked (log_ack_lock_v1 would create a
--     missing one; this function leaves that to log_ack_v1);
--   * queen.log_ack_fence_v1 passes for every item: every offset is past
--     the cursor and, with a lease, the cursor holds that lease, it has not
--     expired and it reaches the highest offset.
-- When all hold, the cursor moves through queen.log_ack_move_v1 (the one
-- move of every ack path), and the answer says which offset ended the
-- lease (the first to reach the lease's last offset, as in the walk) and
-- the names. When any fails, nothing has been written: the function answers
-- ok = false and the broker sends the items to log_ack_v1, which answers
-- item by item (already acked, lease expired, not found...).
create or replace function queen.log_ack_run_v1(p_group text, p_partition_id uuid, p_lease uuid, p_offsets bigint[], p_txids text[])
returns table (ok boolean, released bigint, queue_name text, partition_name text)
language plpgsql as $$
declare
  v_n     int := cardinality(p_offsets);
  v_lo    bigint;
  v_hi    bigint;
  v_ids   text[];
  v_found boolean;
  v_cur   queen.cursors%rowtype;
begin
  select min(o), max(o), count(distinct o) = v_n into v_lo, v_hi, v_found from unnest(p_offsets) o;
  -- A sparse run (a few items out of a long range) is checked by log_ack_v1's key probes instead.
  if v_n = 0 or not coalesce(v_found, false) or cardinality(p_txids) is distinct from v_n or v_hi - v_lo >= 2 * v_n then
    return query select false, null::bigint, null::text, null::text;
    return;
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
    return query select false, null::bigint, null::text, null::text;
    return;
  end if;

  select * into v_cur from queen.cursors c
   where c.partition_id = p_partition_id and c.consumer_group = p_group
     for update;
  -- log_ack_fence_v1 for every item at once: its checks are monotonic in the
  -- offset, so the lowest and highest offsets decide.
  if not found
     or queen.log_ack_fence_v1(v_lo, p_lease, v_cur.cursor_offset, v_cur.lease_id, v_cur.lease_expires_at, v_cur.lease_last_offset, false) is not null
     or queen.log_ack_fence_v1(v_hi, p_lease, v_cur.cursor_offset, v_cur.lease_id, v_cur.lease_expires_at, v_cur.lease_last_offset, false) is not null then
    return query select false, null::bigint, null::text, null::text;
    return;
  end if;

  perform queen.log_ack_move_v1(p_group, array[p_partition_id], array[v_hi]);
  return query
    select true,
           case when v_cur.lease_id is not null then (select min(o) from unnest(p_offsets) o where o >= v_cur.lease_last_offset) end,
           p.queue_name, p.name
      from queen.partitions p
     where p.id = p_partition_id;
end
$$;
