-- Writes a run of items as new messages head+1.. in item order (the items'
-- shape as queen.log_append_v1 takes them); the caller holds the append
-- lock and has settled that every item is new, or lets the unique index
-- tell it otherwise.
create or replace function queen.log_insert_new_v1(p_partition_id uuid, p_items jsonb, p_head bigint, p_created timestamptz, p_tail bytea, p_producer_sub text)
returns table (msg_offset bigint, id uuid, transaction_id text)
language sql as $$
  insert into queen.messages (partition_id, msg_offset, id, transaction_id, trace_id, traceparent, payload, encrypted, producer_sub, created_at)
  select p_partition_id, p_head + x.ord, queen.uuid_v7(p_created, p_head + x.ord, p_tail), x.e->>'transaction_id', (x.e->>'trace_id')::uuid, x.e->>'traceparent',
         case when x.e ? 'encrypted' then null else x.e->'payload' end,
         case when x.e ? 'encrypted' then decode(x.e->>'encrypted', 'base64') end, p_producer_sub, p_created
    from jsonb_array_elements(p_items) with ordinality as x(e, ord)
  returning msg_offset, id, transaction_id
$$;
