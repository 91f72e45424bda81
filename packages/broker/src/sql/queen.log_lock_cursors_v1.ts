// The TypeScript half of queen.log_lock_cursors_v1.sql, beside it.

/**
 * Creates the cursor rows a transaction's acks need and locks them, in the
 * order every ack path takes. $1: [{partition_id, consumer_group}] as jsonb.
 */
export const LOCK_CURSORS_SQL = 'select queen.log_lock_cursors_v1($1::jsonb)';
