// The TypeScript half of queen.ensure_partitions_v1.sql, beside it.

/** Creates the queues and partitions $1 names ([{queue, partition}] as jsonb) that do not exist; one row per target. */
export const ENSURE_PARTITIONS_SQL = 'select * from queen.ensure_partitions_v1($1::jsonb)';

/** A row of ENSURE_PARTITIONS_SQL. */
export interface EnsuredPartitionRow {
  queue_name: string;
  partition_name: string;
  partition_id: string;
}
