-- Hot paths made set-based. Measured with track_functions = 'pl' on a
-- pop + ack loop of batches of 100 (one connection, 8 partitions): the ack
-- cost 36.7 ms per batch, because it moved the cursor once per message
-- (queen.log_move_cursor_v1: an update and a delete each) and decoded every
-- message id through a regex. Nothing here changes what a caller sees.

-- The functions this migration created or replaced are defined since issue 30
-- in packages/broker/src/sql/, one file each, applied after the migrations (migrate.ts).

