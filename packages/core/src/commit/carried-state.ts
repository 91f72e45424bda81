import { perRunner, type RunnerContext } from '../context/runner-context.js';
import type { StateOp, StateRow } from '../context/wire.js';

// A window partition's state rows as this runner's own last cycle left them,
// so the next cycle over the same partition can skip its state/get round
// trip. What makes this safe is not the runner's memory but the server's
// compare-and-set: every state op carries the version it was read at, so a
// cycle computed from rows someone else has changed since gets
// VERSION_CONFLICT and is recomputed from a fresh read. Rows can only be
// *added* by a cycle that acks (and so moves the source cursor), which is
// why carried rows are used only for the batch that starts exactly where
// this runner's last ack ended: a cycle of another runner in between would
// have moved the cursor past that offset.

interface Carried {
  /** The partition's rows (the read's key prefix) after the cycle. */
  rows: StateRow[];
  /** The first offset of the batch these rows are valid for: the cycle's last acked offset + 1. */
  nextOffset: string;
}

const carriedByRunner = new WeakMap<RunnerContext, Map<string, Carried>>();

/**
 * Partitions whose rows a runner carries at most; past it the one carried
 * longest ago is dropped (its next cycle reads). A query over ever-new
 * partitions (one per customer) must not grow the runner without bound.
 */
const MAX_CARRIED_PARTITIONS = 1024;

/** The rows carried for a batch of `partitionId` starting at `firstOffset`, or undefined (read them). */
export function carriedRows(rt: RunnerContext, partitionId: string, firstOffset: string): StateRow[] | undefined {
  const c = carriedByRunner.get(rt)?.get(partitionId);
  return c && c.nextOffset === firstOffset ? c.rows : undefined;
}

/**
 * Any commit of the partition (a cycle, an idle flush) drops what was carried
 * before it is sent: an answer that never arrives leaves the state unknown.
 */
export function forgetCarried(rt: RunnerContext, partitionId: string): void {
  carriedByRunner.get(rt)?.delete(partitionId);
}

/**
 * After a committed cycle: the rows it read with its state ops applied, at
 * the versions the server answered (`versions`, by key). Values go through
 * JSON as the server stores them (jsonb), so a carried row's value reads
 * exactly like a fetched one's (no `updated_at`: nothing reads it). Not
 * carried when a version is missing.
 */
export function carryRows(
  rt: RunnerContext,
  partitionId: string,
  lastOffset: string,
  read: readonly StateRow[],
  ops: readonly StateOp[],
  versions: ReadonlyMap<string, number | null>,
): void {
  const rows = new Map(read.map((r) => [r.key, r]));
  for (const op of ops) {
    if (op.type === 'delete') {
      rows.delete(op.key);
      continue;
    }
    const version = versions.get(op.key);
    if (typeof version !== 'number') return;
    rows.set(op.key, { key: op.key, value: JSON.parse(JSON.stringify(op.value ?? null)), version });
  }
  // New rows go last, not in the server's key order: the order only decides
  // the order of a later cycle's deletes, and its emits are sorted anyway.
  const carried = perRunner(carriedByRunner, rt);
  carried.delete(partitionId); // re-inserted last: the map's order is the order of carrying
  carried.set(partitionId, { rows: [...rows.values()], nextOffset: (BigInt(lastOffset) + 1n).toString() });
  if (carried.size > MAX_CARRIED_PARTITIONS) carried.delete(carried.keys().next().value!);
}
