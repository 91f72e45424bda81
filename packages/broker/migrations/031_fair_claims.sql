-- Fair claim order, weights and conflation (queen.log_pop_v4).
--
-- The wildcard pop takes two more arguments: where the caller's round of
-- the queue's pending partitions stands, and the partitions it owes more
-- turns for their weight; it answers each claimed partition's weight. The
-- options it reads (claimOrder, partitionWeights, conflatedGroups) live in
-- queen.queues.options like every queue option: no table changes.
drop function if exists queen.log_pop_v3(p_queue_id uuid, p_partition_id uuid, p_group text, p_batch integer, p_max_partitions integer, p_auto_ack boolean, p_lease_id uuid, p_sub_mode text, p_sub_start timestamp with time zone, p_max_bytes bigint);
