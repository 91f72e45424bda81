// The TypeScript half of queen.log_retention_candidates_v1.sql, beside it.

/** The partitions that may have segments to drop, one row each. */
export const RETENTION_CANDIDATES_SQL = 'select id from queen.log_retention_candidates_v1() id';

/** A row of RETENTION_CANDIDATES_SQL. */
export interface RetentionCandidateRow {
  id: string;
}
