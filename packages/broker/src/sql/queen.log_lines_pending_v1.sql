-- Which lines of parked long-poll pops (wait-room.ts) have a message past
-- their group's cursor: the 1-based indexes of those lines, given as three
-- arrays of one entry per line (queue name, consumer group, partition name or
-- null for any partition of the queue). A message past the cursor is pending
-- whether or not a pop could claim it now (a lease, a retry delay, a delay or
-- a window buffer may hold it back): those holds run out without a write to
-- wake anyone, so a line with pending messages looks again every second. A
-- line with none can only be fed by a write, and every write wakes it.
-- Unknown queues and partitions have none. Like queen.log_claimable_any_v1's
-- test, without its lease and retry conditions; a partition without a cursor
-- row of the group counts from its first retained message.
create or replace function queen.log_lines_pending_v1(p_queues text[], p_groups text[], p_partitions text[])
returns setof int
language sql stable
set enable_seqscan = off
as $$
  select l.i::int
    from unnest(p_queues, p_groups, p_partitions) with ordinality l(queue_name, consumer_group, partition_name, i)
    join queen.queues q on q.name = l.queue_name
   -- One branch per kind of line, each planned for its own key: a pinned
   -- line reads its one partition, a line of the queue its partitions.
   where case when l.partition_name is null
               and exists (select 1 from queen.pending_groups g where g.queue_id = q.id and g.consumer_group = l.consumer_group)
         then exists (
           -- A group listed for the queue (issue 31): its pending set, not
           -- every partition of the queue.
           select 1 from queen.pending pp
             join queen.partitions p on p.id = pp.partition_id
             left join queen.cursors c on c.partition_id = pp.partition_id and c.consumer_group = l.consumer_group
            where pp.queue_id = q.id and pp.consumer_group = l.consumer_group
              and p.head_offset > greatest(coalesce(c.cursor_offset, 0), p.first_offset - 1))
         when l.partition_name is null then exists (
           select 1 from queen.partitions p
             left join queen.cursors c on c.partition_id = p.id and c.consumer_group = l.consumer_group
            where p.queue_id = q.id
              and p.head_offset > greatest(coalesce(c.cursor_offset, 0), p.first_offset - 1))
         else exists (
           select 1 from queen.partitions p
             left join queen.cursors c on c.partition_id = p.id and c.consumer_group = l.consumer_group
            where p.queue_id = q.id and p.name = l.partition_name
              and p.head_offset > greatest(coalesce(c.cursor_offset, 0), p.first_offset - 1))
         end
$$;
