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
create or replace function queen.log_retained_duplicates_v1(p_partition_id uuid, p_txids text[])
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
