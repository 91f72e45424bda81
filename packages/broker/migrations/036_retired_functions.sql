-- Functions no path of the broker calls any more, and the ack's old
-- signature. Each function's definition lives in its file under src/sql
-- and is applied after the migrations; a function whose file is gone, or
-- whose arguments changed, stays in a database until a migration drops it.
--
-- Gone: the whole retention pass in one call (the broker runs
-- log_retention_partition_v1 per partition), the cycle's sink pushes named
-- by queue and partition (the broker resolves them to partition ids first:
-- push_sink_runs_v1), the text-taking failure (fail_v2 takes the code), and
-- the ack's entry points of an unreleased build (log_ack_v1, log_ack_run_v1).
drop function if exists queen.log_retention_v1();
drop function if exists queen_streams.push_sink_items_v1(p_items jsonb, p_producer_sub text);
drop function if exists queen_streams.push_results_v1(p_answer jsonb, p_pids uuid[], p_queues text[], p_txids text[], p_traces jsonb[]);
drop function if exists queen_streams.fail(p_code text, p_error text, p_extra jsonb);
drop function if exists queen.log_ack_v1(p_group text, p_items jsonb);
drop function if exists queen.log_ack_run_v1(p_group text, p_partition_id uuid, p_lease uuid, p_offsets bigint[], p_txids text[]);
-- queen.log_ack_v2 lost its test-only last argument (p_walk boolean): its
-- file creates the six-argument form.
drop function if exists queen.log_ack_v2(p_group text, p_items jsonb, p_partition_id uuid, p_lease uuid, p_offsets bigint[], p_txids text[], p_walk boolean);
