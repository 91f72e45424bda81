-- Charges one failed delivery to (message, group) and answers the new count.
create or replace function queen.log_charge_failure_v1(p_partition_id uuid, p_group text, p_offset bigint) returns int
language sql as $$
  insert into queen.failures as f (partition_id, consumer_group, msg_offset, retry_count)
  values (p_partition_id, p_group, p_offset, 1)
  on conflict (partition_id, consumer_group, msg_offset) do update set retry_count = f.retry_count + 1
  returning retry_count
$$;
