import type { ErrorCode, KvOpResult } from '@queen-mq/protocol';

// The TypeScript half of queen.kv_apply_v1.sql, beside it.

/** Applies KV ops ($1, jsonb, in array order) in the caller's transaction, rank-1 locks first. */
export const KV_APPLY_SQL = 'select queen.kv_apply_v1($1::jsonb) as r';

/**
 * What queen.kv_apply_v1 answers per op: a transaction's kvResults entry plus
 * what the single-op routes also return (the routes pick their fields).
 */
export interface AppliedOp extends KvOpResult {
  created?: boolean;
  expiresAt?: string | null;
  updatedAt?: string;
}

/** The row of KV_APPLY_SQL: every op's result, or the first op that failed. */
export interface KvApplyRow {
  r: { ok: true; results: AppliedOp[] } | { ok: false; index: number; code: ErrorCode; currentVersion?: number };
}
