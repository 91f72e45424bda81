-- Broker semantics beyond push/pop/ack: seek, group delete, retention,
-- partition cleanup and the cursor locking of transactions (queue delete is
-- in 005, because it removes pending timers too).
-- Lock order (PROTOCOL §4): partition rows (rank 4) ascending id before
-- cursor rows (rank 5) ascending (partition id, group).

-- The functions this migration created or replaced are defined since issue 30
-- in packages/broker/src/sql/, one file each, applied after the migrations (migrate.ts).

