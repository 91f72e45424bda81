-- Transaction acks (PROTOCOL §5.7): the cursor rows of every (partition, group)
-- an ack names, locked ascending before any ack applies (rank 5, after the
-- pushes' append locks). Missing rows of existing partitions are created by
-- the broker in a short transaction before; rows of partitions first written
-- by this transaction's pushes are created here, under our own append lock.
-- targets: [{partitionId, consumerGroup}]
create or replace function queen.log_lock_cursors_v1(p_targets jsonb) returns void
language plpgsql set enable_seqscan = off as $$
begin
  insert into queen.cursors (partition_id, consumer_group, cursor_offset)
  select t.pid, t.grp, queen.log_cursor_start_v1(t.pid, t.grp)
    from (select distinct (e->>'partitionId')::uuid as pid, e->>'consumerGroup' as grp from jsonb_array_elements(p_targets) e) t
    join queen.partitions p on p.id = t.pid
   order by t.pid, t.grp
  on conflict do nothing;
  perform 1 from queen.cursors c
   where (c.partition_id, c.consumer_group) in
         (select (e->>'partitionId')::uuid, e->>'consumerGroup' from jsonb_array_elements(p_targets) e)
   order by c.partition_id, c.consumer_group for update;
end
$$;
