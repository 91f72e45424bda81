-- Retry backoff applied (issue 32): a queue that sets `retryDelay` (ms) keeps
-- a failed message from its consumer group for that long; without it a
-- failed message is redelivered at once, as before.
--
-- Queen v1 stores retry_delay and never reads it. We apply it to an ack with
-- status 'failed' that leaves the message for redelivery (below retryLimit).
-- Not to a 'retry' ack (a consumer handing its lease back uncharged) and not
-- to an expired lease (its messages already waited leaseTime); a dead letter
-- moves on at once as before.
--
-- Order per partition is kept: the failed message is the cursor's next one,
-- so while its delay runs the whole partition is held back for that group
-- (queen.cursors.retry_at, like a lease nobody holds), and the failed message
-- is the first one redelivered when it passes. Other partitions and other
-- groups are not affected.
--
-- The delay itself is queen.retry_delay_ms_v1 (src/sql); set by the walk of
-- queen.log_ack_v2, read by queen.log_pop_v3 and the wake hints
-- (queen.log_claimable_*), ended early by queen.log_seek_v1.

alter table queen.cursors add column retry_at timestamptz;

-- Stored options hold every option with its default filled in, so until now
-- every configured queue held retryDelay 1000, never applied. retryDelay is
-- applied only when set explicitly (configure no longer fills it in): the
-- stored default is dropped so that existing queues keep redelivering at
-- once. A queue that had set exactly 1000 sets it again to have it applied.
update queen.queues set options = options - 'retryDelay' where options->>'retryDelay' = '1000';
