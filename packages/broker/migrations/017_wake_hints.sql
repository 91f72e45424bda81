-- Fewer wake-ups for nothing (issue 12). A pop that got messages woke the
-- next pop parked in its line, and an ack that released a lease woke one
-- too, whether or not anything was left to claim. With one producer and four
-- consumers (the end-to-end bench) that was two pop statements finding
-- nothing for every one that found a batch, at ~0.5 ms of PostgreSQL each.
-- The pop and ack statements now ask these functions whether a pop could
-- claim something after them, and the broker wakes a waiter only then.
--
-- Both are volatile, so their query runs in a snapshot of its own, taken
-- when they are called: after the pop's claim or the ack's move in the same
-- statement, which the statement's own snapshot would not show (it would
-- still see the partitions just claimed as free). What a pop would claim is
-- read as queen.log_pop_v3 picks its candidates: messages after the cursor
-- (or the retained start) and no live lease. Delays and window buffers are
-- not applied, so an answer may be yes for messages not yet due (a wake-up
-- that finds nothing, as before), never no for messages that are due.

-- The functions this migration created or replaced are defined since issue 30
-- in packages/broker/src/sql/, one file each, applied after the migrations (migrate.ts).

