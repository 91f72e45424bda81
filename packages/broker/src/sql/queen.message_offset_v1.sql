-- The offset of the retained message a wire transactionId names in a
-- partition, or null: a client-chosen transactionId through the dedup index,
-- else the id of a message pushed without one through the primary key.
-- Both are single index lookups whatever the statistics.
create or replace function queen.message_offset_v1(p_partition_id uuid, p_transaction_id text) returns bigint
language sql stable parallel safe as $$
  select coalesce(
    (select m.msg_offset from queen.messages m
      where m.partition_id = p_partition_id and m.transaction_id = p_transaction_id),
    (select m.msg_offset from queen.messages m
      where m.partition_id = p_partition_id and m.msg_offset = queen.id_offset(p_transaction_id)
        and m.transaction_id is null and m.id::text = lower(p_transaction_id)))
$$;
