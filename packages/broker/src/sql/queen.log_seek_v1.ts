// The TypeScript half of queen.log_seek_v1.sql, beside it.

/**
 * Moves group $1's cursors on queue $2 (partition $3, or every partition when
 * null) to offset $4 or to the first message at or after time $5.
 */
export const SEEK_SQL = 'select * from queen.log_seek_v1($1, $2, $3, $4::bigint, $5::timestamptz)';

/** A row of SEEK_SQL: each partition moved, with its cursor after the seek. */
export interface SeekRow {
  partition_id: string;
  cursor_offset: string;
}
