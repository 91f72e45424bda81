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
