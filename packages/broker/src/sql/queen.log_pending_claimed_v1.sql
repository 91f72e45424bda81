-- A pop claimed the partition's messages up to p_last for the group: its
-- pending row moves to where the partition now stands, the createdAt of
-- the next message, or (claimed up to the head) the end of the lease, when
-- the claimed messages could come back. An autoAck pop that took
-- everything drops the row. A row a push holds is left alone (skip
-- locked: a pop never waits on a push); the push keeps it pending and its
-- since older than it is, which only moves it forward in the order.
create or replace function queen.log_pending_claimed_v1(
  p_queue_id uuid, p_group text, p_partition_id uuid, p_last bigint, p_auto_ack boolean, p_lease_ends timestamptz
) returns void
language plpgsql set enable_seqscan = off as $$
declare
  v_next timestamptz;
begin
  perform 1 from queen.pending pp
   where pp.queue_id = p_queue_id and pp.consumer_group = p_group and pp.partition_id = p_partition_id
     for update skip locked;
  if not found then return; end if;
  v_next := (select m.created_at from queen.messages m where m.partition_id = p_partition_id and m.msg_offset = p_last + 1);
  if v_next is null and p_auto_ack then
    delete from queen.pending pp
     where pp.queue_id = p_queue_id and pp.consumer_group = p_group and pp.partition_id = p_partition_id;
  else
    update queen.pending pp set since = coalesce(v_next, p_lease_ends)
     where pp.queue_id = p_queue_id and pp.consumer_group = p_group and pp.partition_id = p_partition_id;
  end if;
end
$$;
