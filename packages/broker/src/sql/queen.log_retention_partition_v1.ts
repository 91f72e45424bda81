// The TypeScript half of queen.log_retention_partition_v1.sql, beside it.

/** Drops at most $2 expired segments of partition $1, in the caller's transaction. */
export const RETENTION_PARTITION_SQL = 'select queen.log_retention_partition_v1($1, $2) as r';

/** The row of RETENTION_PARTITION_SQL: `more` while expired segments remain. */
export interface RetentionPartitionRow {
  r: { segmentsDropped: number; messagesDropped: number; more: boolean };
}
