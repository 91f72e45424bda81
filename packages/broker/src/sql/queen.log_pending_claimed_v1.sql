-- A pop claimed the partition's messages up to p_last for the group: its
-- pending row's since moves to the createdAt of the next message, the
-- oldest one pending once the claim is acked (while the lease runs, pops
-- pass the row over). Claimed up to the head, since stays: if the claim
-- comes back (a failed ack, an expired lease) its first message is the
-- oldest again; if it is acked, the next pop that reaches the row drops it.
-- An autoAck pop that took everything drops the row at once. A row a push
-- holds is left alone (skip locked: a pop never waits on a push); the push
-- keeps it pending, its since older than it is, which only moves it forward
-- in the order.
create or replace function queen.log_pending_claimed_v1(
  p_queue_id uuid, p_group text, p_partition_id uuid, p_last bigint, p_auto_ack boolean
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
  if v_next is not null then
    update queen.pending pp set since = v_next
     where pp.queue_id = p_queue_id and pp.consumer_group = p_group and pp.partition_id = p_partition_id;
  elsif p_auto_ack then
    delete from queen.pending pp
     where pp.queue_id = p_queue_id and pp.consumer_group = p_group and pp.partition_id = p_partition_id;
  end if;
end
$$;
