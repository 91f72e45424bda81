-- Whether a pop of p_group on the queue (or on its one partition) could
-- claim something now.
-- A partition whose retry delay runs for the group (queen.cursors.retry_at,
-- set by a failed ack on a queue with retryDelay) has nothing to claim.
-- Of the queue, it reads the group's pending set (queen.pending, issue 31)
-- once the group pops the queue by wildcard; before that, the partitions.
create or replace function queen.log_claimable_any_v1(p_queue_id uuid, p_partition_id uuid, p_group text) returns boolean
language sql volatile set enable_seqscan = off as $$
  select case
    when p_partition_id is not null then exists (
      select 1
        from queen.partitions p
        left join queen.cursors c on c.partition_id = p.id and c.consumer_group = p_group
       where p.id = p_partition_id and p.queue_id = p_queue_id
         and p.head_offset > greatest(coalesce(c.cursor_offset, 0), p.first_offset - 1)
         and (c.lease_id is null or c.lease_expires_at <= now())
         and (c.retry_at is null or c.retry_at <= now()))
    when exists (select 1 from queen.pending_groups g where g.queue_id = p_queue_id and g.consumer_group = p_group) then exists (
      select 1
        from queen.pending pp
        join queen.partitions p on p.id = pp.partition_id
        left join queen.cursors c on c.partition_id = pp.partition_id and c.consumer_group = p_group
       where pp.queue_id = p_queue_id and pp.consumer_group = p_group
         and p.head_offset > greatest(coalesce(c.cursor_offset, 0), p.first_offset - 1)
         and (c.lease_id is null or c.lease_expires_at <= now())
         and (c.retry_at is null or c.retry_at <= now()))
    else exists (
      select 1
        from queen.partitions p
        left join queen.cursors c on c.partition_id = p.id and c.consumer_group = p_group
       where p.queue_id = p_queue_id
         and p.head_offset > greatest(coalesce(c.cursor_offset, 0), p.first_offset - 1)
         and (c.lease_id is null or c.lease_expires_at <= now())
         and (c.retry_at is null or c.retry_at <= now()))
  end
$$;
