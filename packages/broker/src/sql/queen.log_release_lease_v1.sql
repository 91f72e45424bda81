create or replace function queen.log_release_lease_v1(p_partition_id uuid, p_group text) returns void
language sql as $$
  update queen.cursors set lease_id = null, lease_expires_at = null, lease_last_offset = null
   where partition_id = p_partition_id and consumer_group = p_group
$$;
