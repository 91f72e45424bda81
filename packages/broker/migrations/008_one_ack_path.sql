-- One ack path (issue 14). The ack route (queen.log_ack_v1's one-move-per-
-- partition path and the item-by-item walk queen.log_ack_items_v1) and a
-- stream cycle's source ack (queen_streams.apply_element) each restated the
-- same three steps: cursor rows created and locked ascending, the fence
-- (cursor, lease, what the lease delivered), the cursor move. Each step is
-- now one function here, and all three callers go through them:
--   queen.log_ack_lock_v1   cursor rows created (existing partitions) and locked, ascending (rank 5)
--   queen.log_ack_fence_v1  the verdict on one item against its cursor row as found
--   queen.log_ack_move_v1   cursors moved to the highest acked offset per partition, set-based,
--                           ending leases as queen.log_ack_ends_lease_v1 says
-- Failure texts are no longer written here: SQL answers the catalogue code
-- (and structured fields); the broker words it from the one catalogue in
-- @queen-mq/protocol (errors.ts). The routes answer as before but for the
-- wording of a few failures, which is now the catalogue's.

-- The functions this migration created or replaced are defined since issue 30
-- in packages/broker/src/sql/, one file each, applied after the migrations (migrate.ts).

