-- Retention and partition cleanup follow what they delete (issue 31).
--
-- A retention pass probed the oldest segment of every partition of every
-- queue with retention (366 ms at 100,000 partitions kept a day, nothing
-- due), and the partition cleanup read every partition for the empty ones.
-- partitions.retained_since is the createdAt of the partition's oldest
-- retained message (the first_created_at of its oldest segment), null when
-- it retains nothing. Who writes it (src/sql):
-- - a push sets it when it is null (the partition was empty, or new);
-- - retention sets it to the first_created_at of the oldest segment it left,
--   null when it dropped them all (then the partition is empty);
-- - nothing else: a partition row is created with null.
-- A segment is due only when its last message is older than a window, and
-- createdAt never goes backwards in a partition, so a partition with a due
-- segment has retained_since older than its queue's shortest window: a pass
-- probes, per queue with retention, the range of partitions_retained_since
-- older than that window (queen.log_retention_candidates_v1), and the
-- cleanup reads partitions_empty (queen.log_partition_cleanup_v1).
-- A push changes the column only when the partition was empty: every other
-- push leaves the indexed value as it was, so its update of the partition
-- row stays HOT (no index entry written).
-- Not an index on retained_since alone, read from now() minus the shortest
-- window of any queue: one queue of a short window would make every pass
-- read the partitions of all the others older than that. Nor one on
-- log_segments (first_created_at), which no push writes either: the same,
-- and up to a segment per hour of each partition (QUEEN_SEGMENT_MAX_AGE_S).
alter table queen.partitions add column retained_since timestamptz;

update queen.partitions p
   set retained_since = (select s.first_created_at from queen.log_segments s
                          where s.partition_id = p.id order by s.first_offset limit 1)
 where p.head_offset >= p.first_offset;

-- Both partial, on the two sides of retained_since: a statement that does
-- not name retained_since cannot take them. (On (queue_id, retained_since)
-- whole, the lookup of a partition by (queue_id, name), planned while the
-- table was tiny, took it instead of partitions_queue_id_name_key and read
-- every partition: scale-plans.test.ts.)
create index partitions_retained_since on queen.partitions (queue_id, retained_since) where retained_since is not null;
create index partitions_empty on queen.partitions (id) where retained_since is null;
