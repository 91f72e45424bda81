-- THE allocator entry point of PROTOCOL §8 for one message: push,
-- transaction, stream cycle sink pushes and timer fires all append through
-- here (or through log_push_many_v1, the same core for a whole request).
create or replace function queen.log_push_one_v1(
  p_partition_id uuid, p_payload jsonb, p_transaction_id text, p_trace_id uuid,
  p_producer_sub text, p_is_encrypted boolean, p_encrypted bytea default null
) returns jsonb
language sql as $$
  select jsonb_build_object('status', a.r_status, 'message_id', a.r_message_id, 'partition_id', p_partition_id,
           'offset', a.r_offset::text, 'created_at', queen.iso(a.r_created_at), 'transaction_id', coalesce(a.r_transaction_id, a.r_message_id::text),
           'queue_name', p.queue_name, 'partition_name', p.name)
    from queen.log_append_v1(p_partition_id,
           jsonb_build_array(jsonb_build_object('payload', p_payload, 'transaction_id', p_transaction_id, 'trace_id', p_trace_id)
             || case when p_is_encrypted then jsonb_build_object('encrypted', encode(p_encrypted, 'base64')) else '{}'::jsonb end),
           p_producer_sub) a,
         queen.partitions p
   where p.id = p_partition_id
$$;
