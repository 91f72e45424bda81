// The TypeScript half of queen.log_extend_lease_v1.sql, beside it.

/** Extends a lease ($1) by $2 seconds from now. */
export const EXTEND_LEASE_SQL = 'select queen.log_extend_lease_v1($1, $2) as r';

/** The row of EXTEND_LEASE_SQL: the catalogue code when it failed, the new expiry when not. */
export interface ExtendLeaseRow {
  r: { success: boolean; code?: string; expiresAt?: string };
}
