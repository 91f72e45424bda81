// The TypeScript half of queen.log_partition_cleanup_v1.sql, beside it.

/** Deletes the partitions empty and untouched for $1 seconds. */
export const PARTITION_CLEANUP_SQL = 'select queen.log_partition_cleanup_v1($1) as r';

/** The row of PARTITION_CLEANUP_SQL: `partitions` holds [queue, partition] of each deleted one. */
export interface PartitionCleanupRow {
  r: { deleted: number; vetoed: number; partitions: [string, string][] };
}
