-- A wildcard pop found nothing left for the group in the partition (its
-- cursor, locked, at p_upto: the head or past the retained messages): the
-- pending row goes, unless a push holds the partition (skip locked: a pop
-- never waits on a push; that push keeps the partition pending) or raised
-- its head past p_upto meanwhile. The partition row is locked shared for
-- the rest of the pop's transaction: a push appends under its row lock, so
-- none can append between this check and the pop's commit, and the next
-- one finds no row and writes it (a push leaves a row it finds as it is,
-- queen.log_append_advance_v1). Only a row pending since over 10 s ago: a
-- drained partition that is pushed to again soon is cheaper kept (the pop's
-- scan passes it over while it is drained).
create or replace function queen.log_pending_drop_v1(p_queue_id uuid, p_group text, p_partition_id uuid, p_upto bigint) returns void
language plpgsql set enable_seqscan = off as $$
begin
  perform 1 from queen.pending x
   where x.queue_id = p_queue_id and x.consumer_group = p_group and x.partition_id = p_partition_id
     and x.since < now() - interval '10 seconds';
  if not found then return; end if;
  perform 1 from queen.partitions p where p.id = p_partition_id and p.head_offset <= p_upto for share skip locked;
  if not found then return; end if;
  delete from queen.pending pp
   where pp.ctid = (select x.ctid from queen.pending x
                     where x.queue_id = p_queue_id and x.consumer_group = p_group and x.partition_id = p_partition_id
                       and x.since < now() - interval '10 seconds'
                       for update skip locked);
end
$$;
