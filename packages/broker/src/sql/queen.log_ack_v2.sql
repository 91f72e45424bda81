-- The ack: one function, one statement from the broker, for every ack
-- request. It falls through, inside SQL, from the cheapest part that can
-- decide to the one that decides everything:
--   1. queen.log_ack_pop_run_v1: a pop's run, given as arrays (p_partition_id,
--      p_lease, p_offsets, p_txids; p_items null). Answers the row of the
--      applied run, r_answer null (the broker builds the per-item results
--      from the run: runAnswerOf, log/ack.ts).
--   2. queen.log_ack_completed_v1: every item completed, one cursor move per
--      partition. r_answer is the compact {offsets, released, names}.
--   3. queen.log_ack_walk_v1: item by item, anything else. r_answer is the
--      per-item results by idx.
-- A part that declines has written nothing, so the next one starts from the
-- request as it came; a run part 1 declines goes on as the jsonb items the
-- broker would have sent for it.
create or replace function queen.log_ack_v2(p_group text, p_items jsonb, p_partition_id uuid, p_lease uuid, p_offsets bigint[], p_txids text[])
returns table (r_released bigint, r_queue_name text, r_partition_name text, r_answer jsonb)
language plpgsql set enable_seqscan = off as $$
declare
  v_answer jsonb;
begin
  if p_offsets is not null then
    return query
      select r.r_released, r.r_queue_name, r.r_partition_name, null::jsonb
        from queen.log_ack_pop_run_v1(p_group, p_partition_id, p_lease, p_offsets, p_txids) r;
    if found then
      return;
    end if;
  end if;
  if p_items is null then
    select jsonb_agg(jsonb_build_object('idx', i.n - 1, 'transactionId', i.txid, 'partitionId', p_partition_id, 'leaseId', p_lease,
                                        'offset', i.off::text, 'status', 'completed') order by i.n)
      into p_items
      from unnest(p_offsets, p_txids) with ordinality as i(off, txid, n);
  end if;

  v_answer := queen.log_ack_completed_v1(p_group, p_items);
  if v_answer is null then
    v_answer := queen.log_ack_walk_v1(p_group, p_items);
  end if;
  return query select null::bigint, null::text, null::text, v_answer;
end
$$;
