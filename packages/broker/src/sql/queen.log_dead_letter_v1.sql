create or replace function queen.log_dead_letter_v1(p_partition_id uuid, p_group text, p_offset bigint, p_error text, p_retry_count int) returns void
language sql as $$
  insert into queen.dlq (partition_id, consumer_group, msg_offset, error_message, retry_count)
  values (p_partition_id, p_group, p_offset, p_error, p_retry_count)
  on conflict (partition_id, consumer_group, msg_offset) do nothing
$$;
