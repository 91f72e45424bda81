// The TypeScript half of queen.kv_purge_expired_v1.sql, beside it.

/** Deletes expired keys no writer holds; answers how many. */
export const KV_PURGE_EXPIRED_SQL = 'select queen.kv_purge_expired_v1() as n';

/** The row of KV_PURGE_EXPIRED_SQL. */
export interface KvPurgeExpiredRow {
  n: number;
}
