-- Consumer group delete (PROTOCOL §5.9): cursors (with their leases) and
-- failure records of the group, on every queue or on one; subscriptions too
-- when asked, and the group's pending sets (queen.pending, issue 31) under
-- each queue's pending lock, taken first. DLQ entries stay. Answers the number of cursor rows removed.
create or replace function queen.log_delete_group_v1(p_group text, p_queue_id uuid, p_delete_metadata boolean) returns int
language plpgsql as $$
declare
  v_n int;
  v_queue uuid;
begin
  for v_queue in
    select g.queue_id from queen.pending_groups g
     where g.consumer_group = p_group and (p_queue_id is null or g.queue_id = p_queue_id)
     order by 1
  loop
    perform queen.log_pending_lock_v1(v_queue, false, 5000);
  end loop;
  perform 1 from queen.cursors c
   where c.consumer_group = p_group
     and (p_queue_id is null or c.partition_id in (select p.id from queen.partitions p where p.queue_id = p_queue_id))
   order by c.partition_id, c.consumer_group for update;
  delete from queen.cursors c
   where c.consumer_group = p_group
     and (p_queue_id is null or c.partition_id in (select p.id from queen.partitions p where p.queue_id = p_queue_id));
  get diagnostics v_n = row_count;
  delete from queen.failures f
   where f.consumer_group = p_group
     and (p_queue_id is null or f.partition_id in (select p.id from queen.partitions p where p.queue_id = p_queue_id));
  delete from queen.pending pp using queen.pending_groups g
   where g.consumer_group = p_group and (p_queue_id is null or g.queue_id = p_queue_id)
     and pp.queue_id = g.queue_id and pp.consumer_group = g.consumer_group;
  delete from queen.pending_groups g
   where g.consumer_group = p_group and (p_queue_id is null or g.queue_id = p_queue_id);
  if p_delete_metadata then
    delete from queen.subscriptions s where s.consumer_group = p_group and (p_queue_id is null or s.queue_id = p_queue_id);
  end if;
  return v_n;
end
$$;
