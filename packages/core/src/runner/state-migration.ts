import { randomUUID } from 'node:crypto';
import { QueenError } from '@queen-mq/client';
import type { CompiledQuery } from '../plan/compile.js';
import type { StreamsApi } from '../context/state-api.js';
import type { StateOp } from '../context/wire.js';
import type { MigrateState } from '../plan/stage-options.js';
import { sleep } from '../context/sleep.js';

// A new version whose state is incompatible, deployed with a migrateState
// (issue 33): before it runs, every partition that held state when it was
// registered is rewritten, once. This runner claims a partition, reads its
// rows, rewrites them here, and commits the new rows; the broker applies them
// in one transaction under the partition lock and marks the partition done.
// A partition another runner claimed is waited for: no runner of the new
// version runs a cycle on state that is not migrated yet.

const CLAIM_LEASE_SECONDS = 30;
const WAIT_MS = 200;

/** The ops that turn a partition's rows into the new version's: changed rows upserted, moved or dropped rows deleted; each a compare-and-set on the version read. */
function migrationOps(rows: readonly { key: string; value: unknown; version: number }[], migrateState: MigrateState): StateOp[] {
  const ops: StateOp[] = [];
  const written = new Set<string>();
  const deletes: StateOp[] = [];
  for (const row of rows) {
    // The runner's own rows (`__wm__`, a watermark) mean the same in every version.
    if (row.key.startsWith('__')) continue;
    const next = migrateState({ key: row.key, value: row.value as never });
    if (next === null || next === undefined) {
      deletes.push({ type: 'delete', key: row.key, expected_version: row.version });
      continue;
    }
    const key = next.key ?? row.key;
    if (typeof key !== 'string' || key === '' || key.startsWith('__')) throw new Error(`migrateState answered an invalid key for row "${row.key}"`);
    if (written.has(key)) throw new Error(`migrateState answered key "${key}" for two rows`);
    written.add(key);
    if (key !== row.key) deletes.push({ type: 'delete', key: row.key, expected_version: row.version });
    ops.push({ type: 'upsert', key, value: next.value, ...(key === row.key ? { expected_version: row.version } : {}) });
  }
  // A row moved onto a key another row had: the delete goes first.
  return [...deletes.filter((d) => !written.has(d.key)), ...ops];
}

/** Migrates (or waits for) every pending partition; resolves when all are done. */
export async function migratePartitions(t: { api: StreamsApi; queryId: string; version: string; signal: AbortSignal }, plan: CompiledQuery, partitions: readonly string[]): Promise<number> {
  const claimId = randomUUID();
  let migrated = 0;
  for (const partitionId of partitions) {
    for (;;) {
      if (t.signal.aborted) return migrated;
      const base = { query_id: t.queryId, partition_id: partitionId, version: t.version };
      // A runner without the migrateState (same stages, older build) only waits for one that has it.
      const claim = plan.migration
        ? await t.api.migrationClaim({ ...base, claim_id: claimId, lease_seconds: CLAIM_LEASE_SECONDS })
        : { claimed: false, done: false };
      if (claim.done) break;
      if (!claim.claimed) {
        await sleep(WAIT_MS, t.signal);
        continue;
      }
      const rows = await t.api.stateGet({ query_id: t.queryId, partition_id: partitionId });
      try {
        await t.api.migrationCommit({ ...base, claim_id: claimId, state_ops: migrationOps(rows, plan.migration!.migrateState) });
        migrated += 1;
        break;
      } catch (err) {
        // Another runner took the claim over (ours had run out): it migrates; a row that changed under us: read again.
        if (err instanceof QueenError && (err.code === 'MIGRATION_NOT_CLAIMED' || err.code === 'VERSION_CONFLICT')) continue;
        throw err;
      }
    }
  }
  return migrated;
}
