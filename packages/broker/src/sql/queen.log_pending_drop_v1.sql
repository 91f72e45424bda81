-- A wildcard pop found nothing left for the group in the partition (its
-- cursor, locked, at p_upto: the head or past the retained messages): the
-- pending row goes, unless a push raised head_offset past p_upto meanwhile
-- (the guard) or holds the row now (skip locked: a pop never waits on a
-- push; that push keeps the row pending anyway). Only a row pending since
-- over 10 s ago: a pop's delete makes a push to the partition wait for the
-- pop's commit, and a drained partition that is pushed to again soon is
-- cheaper kept (the pop's scan passes it over while it is drained).
create or replace function queen.log_pending_drop_v1(p_queue_id uuid, p_group text, p_partition_id uuid, p_upto bigint) returns void
language sql set enable_seqscan = off as $$
  delete from queen.pending pp
   where pp.ctid = (select x.ctid from queen.pending x
                     where x.queue_id = p_queue_id and x.consumer_group = p_group and x.partition_id = p_partition_id
                       and x.head_offset <= p_upto and x.since < now() - interval '10 seconds'
                       for update skip locked)
$$;
