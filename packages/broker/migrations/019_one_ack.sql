-- One ack (issue 30): queen.log_ack_v2 takes every ack request in one call,
-- a pop's run as arrays and anything else as jsonb, and falls through inside
-- SQL from the run check to the one-move path to the item walk. The walk's
-- own function goes, and so do the pops that only a bench and a test still
-- called (log_pop_v3 is the broker's; v2 and v1 were wrappers of it).
-- log_ack_v1 and log_ack_run_v1 stay, as thin shims over log_ack_v2, for
-- brokers of the previous release during a rolling upgrade.
drop function if exists queen.log_ack_items_v1(p_group text, p_items jsonb);
drop function if exists queen.log_pop_v1(p_queue_id uuid, p_partition_id uuid, p_group text, p_batch integer, p_max_partitions integer, p_auto_ack boolean, p_lease_id uuid, p_sub_mode text, p_sub_start timestamp with time zone);
drop function if exists queen.log_pop_v2(p_queue_id uuid, p_partition_id uuid, p_group text, p_batch integer, p_max_partitions integer, p_auto_ack boolean, p_lease_id uuid, p_sub_mode text, p_sub_start timestamp with time zone);
