-- The run check of an ack: whether `p_offsets` of one partition hold the
-- messages `p_txids` names, item for item (the wire transactionId, or the
-- message id of a message pushed without one). Only for the items of one
-- pop, a dense range of offsets: they are checked against one index range
-- scan of that range, read into an array by position. False when the range
-- is sparse (a few items out of a long range: the caller's key probes do
-- better) or has a gap, or any offset holds another message.
create or replace function queen.log_ack_run_holds_v1(p_partition_id uuid, p_offsets bigint[], p_txids text[]) returns boolean
language plpgsql stable set enable_seqscan = off as $$
declare
  v_lo    bigint;
  v_hi    bigint;
  v_ids   text[];
  v_whole boolean;
begin
  select min(o), max(o) into v_lo, v_hi from unnest(p_offsets) o;
  if v_lo is null or v_hi - v_lo >= 2 * cardinality(p_offsets) then
    return false;
  end if;
  select array_agg(coalesce(m.transaction_id, m.id::text) order by m.msg_offset), count(*) = v_hi - v_lo + 1
    into v_ids, v_whole
    from queen.messages m
   where m.partition_id = p_partition_id and m.msg_offset between v_lo and v_hi;
  if not v_whole then
    return false;
  end if;
  -- Every offset of the range is there, so position k holds offset v_lo + k - 1.
  return coalesce((select bool_and(v_ids[(i.off - v_lo + 1)::int] = i.txid) from unnest(p_offsets, p_txids) as i(off, txid)), false);
end
$$;
