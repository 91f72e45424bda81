import type { ResolvedWindowOptions } from '../plan/window-options.js';
import type { StateOp, StateRow } from '../context/wire.js';
import { SEP } from '../plan/keys.js';

// Processing time's answer to "was this window already emitted?". Event time
// has its watermark row (`__wm__`): a window ripe at the watermark from before
// a batch was closed by the cycle or flush that moved it there. Processing
// time has no such row — its clock is the batch's newest createdAt, or the
// broker's clock in an idle flush — so a message read after its window was
// closed (stamped before the window's end but committed after a flush closed
// it; a consumer-group seek back) would re-create the window as a fresh row,
// and its emit, carrying the same deterministic transactionId, would be
// answered `duplicate` by the sink: the contribution gone without a trace.
//
// The close horizon is that row: the largest `clock − gracePeriod` at which a
// cycle or flush of this partition closed at least one window. Every window
// of the partition ending at or before it (strictly before, for a merging
// window's inclusive end) that had a row then was emitted; a value for such
// a window whose row is gone is late (onLate). It is written only by a commit
// that closes a window — not by every cycle — and lives under the window's
// key prefix, so the reads a cycle and a flush already make return it (no
// extra request) and the carried rows carry it. Its version fences a flush
// and a cycle racing on one partition like any row (VERSION_CONFLICT →
// re-read and recompute).

/** The close horizon row's key: `<tag>␟__closed__` (under the window's prefix; one separator, so never a window key). */
export function closeHorizonKey(tag: string): string {
  return `${tag}${SEP}__closed__`;
}

/** The stored close horizon (`closedThroughMs`), or undefined before the partition's first close. */
export function storedCloseHorizon(tag: string, stored: ReadonlyMap<string, StateRow>): number | undefined {
  const v = stored.get(closeHorizonKey(tag))?.value;
  return typeof v?.closedThroughMs === 'number' ? v.closedThroughMs : undefined;
}

/**
 * Processing time: the upsert raising the horizon to `closedThroughMs` after a
 * commit that closes `closed` windows, or nothing (event time, nothing
 * closed, or the stored horizon already as far).
 */
export function closeHorizonOps(
  options: Pick<ResolvedWindowOptions, 'eventTime'>,
  tag: string,
  stored: ReadonlyMap<string, StateRow>,
  closedThroughMs: number | undefined,
  closed: number,
): StateOp[] {
  if (options.eventTime || closed === 0 || closedThroughMs === undefined) return [];
  const old = storedCloseHorizon(tag, stored);
  if (old !== undefined && old >= closedThroughMs) return [];
  const key = closeHorizonKey(tag);
  return [{ type: 'upsert', key, value: { closedThroughMs }, expected_version: stored.get(key)?.version ?? 0 }];
}
