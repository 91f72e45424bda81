-- Queue delete (PROTOCOL §5.2), pending timers included. The timers
-- targeting the queue are locked FIRST (rank 2, ascending id) and only those
-- are deleted: a firer holding one of them goes on to its partition lock
-- (rank 4) without meeting us, and a timer scheduled after we started is
-- ordered after the delete (it fires into a re-created queue, like a push
-- would). Partitions are then locked ascending, so a push in flight either
-- commits before (and is deleted) or finds its partition gone and re-creates
-- the queue. Answers whether the queue existed.
create or replace function queen.log_delete_queue_v1(p_queue text) returns boolean
language plpgsql as $$
declare
  v_queue  uuid;
  v_parts  uuid[];
  v_timers uuid[];
begin
  select coalesce(array_agg(s.id), '{}') into v_timers
    from (select t.id from queen.log_timers t where t.queue_name = p_queue order by t.id for update) s;
  delete from queen.log_timers where id = any(v_timers);

  select id into v_queue from queen.queues where name = p_queue for update;
  if not found then return false; end if;

  select coalesce(array_agg(s.id), '{}') into v_parts
    from (select p.id from queen.partitions p where p.queue_id = v_queue order by p.id for update) s;

  perform 1 from queen.cursors c where c.partition_id = any(v_parts)
   order by c.partition_id, c.consumer_group for update;

  delete from queen.messages where partition_id = any(v_parts);
  delete from queen.log_segments where partition_id = any(v_parts);
  delete from queen.failures where partition_id = any(v_parts);
  delete from queen.dlq where partition_id = any(v_parts);
  delete from queen.cursors where partition_id = any(v_parts);
  delete from queen.subscriptions where queue_id = v_queue;
  delete from queen.pending where queue_id = v_queue;
  delete from queen.pending_groups where queue_id = v_queue;
  delete from queen.partitions where queue_id = v_queue;
  delete from queen.queues where id = v_queue;
  return true;
end
$$;
