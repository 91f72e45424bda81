// The TypeScript half of queen_streams.apply_state_ops_v1.sql, beside it
// (a cycle calls the function inside queen.log_streams_cycle_v1; a state
// migration's commit calls it directly).

/** Applies state ops $3 (jsonb) to query $1's partition $2; a failed expectation raises QS001 VERSION_CONFLICT. */
export const APPLY_STATE_OPS_SQL = 'select queen_streams.apply_state_ops_v1($1, $2, $3::jsonb) as r';

/** The row of APPLY_STATE_OPS_SQL. */
export interface ApplyStateOpsRow {
  r: { applied: number };
}
