-- Which of p_partition_ids a pop of p_group could claim now.
-- A partition whose retry delay runs for the group (queen.cursors.retry_at,
-- set by a failed ack on a queue with retryDelay) has nothing to claim.
create or replace function queen.log_claimable_of_v1(p_partition_ids uuid[], p_group text) returns uuid[]
language sql volatile set enable_seqscan = off as $$
  select coalesce(array_agg(p.id), '{}')
    from queen.partitions p
    left join queen.cursors c on c.partition_id = p.id and c.consumer_group = p_group
   where p.id = any(p_partition_ids)
     and p.head_offset > greatest(coalesce(c.cursor_offset, 0), p.first_offset - 1)
     and (c.lease_id is null or c.lease_expires_at <= now())
     and (c.retry_at is null or c.retry_at <= now())
$$;
