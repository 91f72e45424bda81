-- The wildcard pop follows the work, not the queue's size (issue 31).
--
-- A wildcard pop used to read every partition of its queue twice (cursor
-- rows for all of them, then the candidate scan): 1 s on a queue of 50,000
-- partitions where one held a message. It now reads queen.pending: per
-- (queue, consumer group), the partitions that may hold something for the
-- group, ordered by `since`, the createdAt of (a lower bound of) their
-- oldest pending message.
--
-- Who writes it (the functions in src/sql say how, each in its own file):
-- - a push, under its partition's append lock, for every group listed in
--   queen.pending_groups for the queue: head_offset raised to the new head;
--   since kept at the older of the two, or the new createdAt when the group
--   had consumed up to the row's head;
-- - the first wildcard pop of a (queue, group) lists the group and fills in
--   the partitions that already hold something for it;
-- - a pop never writes a row on a claim (a push to the partition would wait
--   for its commit): it reads each row's true oldest message itself;
-- - a pop that finds a row drained for over 10 s deletes it, only if no
--   push raised head_offset meanwhile;
-- - seek and an autoAck pop handing messages back add rows again.
-- Lock order: pending rows come after cursor rows (PROTOCOL §4 rank 5): a
-- push holds only its partitions' append locks when it writes them, a pop
-- and a seek only cursor rows of the same partitions. No foreign keys: a
-- key check locks the partition or queue row, which a push holds while it
-- waits for the queue's pending lock (queen.log_pending_lock_v1); queue
-- delete and partition cleanup delete the rows themselves.
create table queen.pending_groups (
  queue_id        uuid not null,
  consumer_group  text not null,
  primary key (queue_id, consumer_group)
);

create table queen.pending (
  queue_id        uuid not null,
  consumer_group  text not null,
  partition_id    uuid not null,
  head_offset     bigint not null,
  since           timestamptz not null,
  -- Set by a push that found no cursor row of the group for the partition:
  -- the next wildcard pop creates it before it claims anything (a cursor
  -- created while claimed cursors are held could deadlock, PROTOCOL §4).
  needs_cursor    boolean not null default false,
  primary key (queue_id, consumer_group, partition_id)
);
create index pending_order on queen.pending (queue_id, consumer_group, since, partition_id);
create index pending_partition on queen.pending (partition_id);
create index pending_needs_cursor on queen.pending (queue_id, consumer_group) where needs_cursor;

-- A cursor row's foreign key to its partition goes. Its key check locks the
-- partition row (FOR KEY SHARE) whenever a cursor is inserted, or updated in
-- the transaction that inserted it, as a group's first pop does: a pop then
-- waited for a push holding that partition, and the push could be waiting
-- for the pop (its pending rows, or the queue's pending lock). Nothing
-- relied on its cascade: queue delete and partition cleanup delete cursor
-- rows themselves, and no cursor row is written for a partition that does
-- not exist (every insert selects from queen.partitions).
alter table queen.cursors drop constraint if exists cursors_partition_id_fkey;
