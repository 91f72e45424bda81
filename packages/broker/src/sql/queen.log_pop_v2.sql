-- v2 keeps its signature for raw callers (log_pop_v1, benches): no byte bound.
create or replace function queen.log_pop_v2(
  p_queue_id uuid, p_partition_id uuid, p_group text, p_batch int, p_max_partitions int,
  p_auto_ack boolean, p_lease_id uuid, p_sub_mode text default 'all', p_sub_start timestamptz default null
) returns table (
  partition_id uuid, partition_name text, msg_offset bigint, id uuid, transaction_id text, trace_id uuid,
  payload jsonb, encrypted bytea, producer_sub text, created_at text, retry_count int, lease_expired int
)
language sql as $$
  select * from queen.log_pop_v3(p_queue_id, p_partition_id, p_group, p_batch, p_max_partitions,
                                 p_auto_ack, p_lease_id, p_sub_mode, p_sub_start, null)
$$;
