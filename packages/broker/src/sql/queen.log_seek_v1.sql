-- Seek (PROTOCOL §5.9). Moves the cursor of (partition, group) anywhere,
-- backwards included, ends the lease (and a running retry delay) and clears failure records. Cursor rows
-- are created first (committed with the seek), then locked ascending.
-- p_partition_id null = every partition of p_queue_id. Target: p_offset
-- (clamped to the head), else p_ts, else the head. Answers
-- [{partition_id, cursor}] of the rows moved. A partition the seek leaves
-- something pending in rejoins the group's pending set (queen.pending,
-- issue 31), under the queue's pending lock, taken after the cursor rows
-- were created (their key check locks partition rows, which a push holds
-- while it waits for that lock).
create or replace function queen.log_seek_v1(
  p_group text, p_queue_id uuid, p_partition_id uuid, p_offset bigint, p_ts timestamptz
) returns table (partition_id uuid, cursor_offset bigint)
language plpgsql as $$
#variable_conflict use_column
declare
  v_listed boolean := exists (select 1 from queen.pending_groups g where g.queue_id = p_queue_id and g.consumer_group = p_group);
begin
  insert into queen.cursors (partition_id, consumer_group, cursor_offset)
  select p.id, p_group, 0 from queen.partitions p
   where p.queue_id = p_queue_id and (p_partition_id is null or p.id = p_partition_id)
   order by p.id
  on conflict do nothing;

  perform 1 from queen.cursors c join queen.partitions p on p.id = c.partition_id
   where p.queue_id = p_queue_id and (p_partition_id is null or p.id = p_partition_id) and c.consumer_group = p_group
   order by c.partition_id for update of c;

  delete from queen.failures f using queen.partitions p
   where f.partition_id = p.id and p.queue_id = p_queue_id and (p_partition_id is null or p.id = p_partition_id)
     and f.consumer_group = p_group;

  if v_listed then perform queen.log_pending_lock_v1(p_queue_id, false, 5000); end if;
  return query
  with moved as (
    update queen.cursors c
       set cursor_offset = case
             when p_offset is not null then least(p_offset, p.head_offset)
             when p_ts is not null then queen.log_offset_at_v1(p.id, p_ts)
             else p.head_offset end,
           lease_id = null, lease_expires_at = null, lease_last_offset = null, retry_at = null
      from queen.partitions p
     where p.id = c.partition_id and p.queue_id = p_queue_id and (p_partition_id is null or p.id = p_partition_id)
       and c.consumer_group = p_group
    returning c.partition_id, c.cursor_offset
  ), pending as (
    insert into queen.pending as pp (queue_id, consumer_group, partition_id, head_offset, since)
    select p_queue_id, p_group, p.id, p.head_offset,
           coalesce((select m.created_at from queen.messages m
                      where m.partition_id = p.id and m.msg_offset > greatest(s.cursor_offset, p.first_offset - 1)
                      order by m.msg_offset limit 1), now())
      from moved s join queen.partitions p on p.id = s.partition_id
     where v_listed and p.head_offset > greatest(s.cursor_offset, p.first_offset - 1)
     order by p.id
    on conflict (queue_id, consumer_group, partition_id)
    do update set head_offset = greatest(pp.head_offset, excluded.head_offset), since = least(pp.since, excluded.since)
  )
  select s.partition_id, s.cursor_offset from moved s;
end
$$;
