-- log_pop_v1 keeps its signature for raw callers (benches): message rows only.
create or replace function queen.log_pop_v1(
  p_queue_id uuid, p_partition_id uuid, p_group text, p_batch int, p_max_partitions int,
  p_auto_ack boolean, p_lease_id uuid, p_sub_mode text default 'all', p_sub_start timestamptz default null
) returns table (
  partition_id uuid, partition_name text, msg_offset bigint, id uuid, transaction_id text, trace_id uuid,
  payload jsonb, encrypted bytea, producer_sub text, created_at text, retry_count int
)
language sql as $$
  select r.partition_id, r.partition_name, r.msg_offset, r.id, r.transaction_id, r.trace_id,
         r.payload, r.encrypted, r.producer_sub, r.created_at, r.retry_count
    from queen.log_pop_v2(p_queue_id, p_partition_id, p_group, p_batch, p_max_partitions,
                          p_auto_ack, p_lease_id, p_sub_mode, p_sub_start) r
   where r.msg_offset is not null
$$;
