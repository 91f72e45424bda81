import type { CompiledQuery } from '../plan/compile.js';
import type { SourceMessage } from '../context/source-message.js';
import type { StateOp, StateRow } from '../context/wire.js';
import { isMergingWindow } from '../plan/plugins.js';
import { payloadOf } from '../context/source-message.js';
import { runPreStages } from '../commit/pre-ops.js';
import { rowsByKey } from '../context/state-api.js';
import { assignWindows, eventTimeOf } from './window-placement.js';
import { WATERMARK_KEY, openWindowStateKey, userKeyOfWindowKey, windowStateKey } from '../plan/keys.js';
import { lateIdentity } from '../commit/transaction-id.js';
import { flushMergingRows, foldMergingBatch, mergingRipeAts } from './merging-fold.js';
import { closeHorizonOps } from './close-horizon.js';
import {
  compareEmits,
  lateHorizon,
  userStep,
  watermarkBefore,
  watermarkOps,
  type FoldResult,
  type LateContribution,
  type PreparedWindowBatch,
  type WindowEmit,
  type WindowEntry,
  type WindowPlan,
} from './window-fold-shared.js';

// The pure half of a window cycle: prepare a batch, then fold it into the
// rows read from state (fixed windows here, merging ones in merging-fold.ts),
// or close the ripe rows of an idle flush. No I/O: window-cycle.ts reads
// and commits.

export { type PreparedWindowBatch, type WindowEmit };

export function prepareWindowBatch(plan: CompiledQuery, messages: readonly SourceMessage[]): PreparedWindowBatch {
  const { plugin, options, tag } = plan.window!;
  const merging = isMergingWindow(plugin);
  const entries: WindowEntry[] = [];
  const touched = new Set<string>();
  let maxEventMs: number | undefined;
  let newestCreatedMs = -Infinity;
  let oldestCreatedMs = Infinity;
  // Messages pushed together share a createdAt: parse each distinct text once.
  let lastCreatedText = '';
  let lastCreated = NaN;
  for (const message of messages) {
    if (message.createdAt !== lastCreatedText) {
      lastCreatedText = message.createdAt;
      lastCreated = Date.parse(lastCreatedText);
    }
    const created = lastCreated;
    if (created > newestCreatedMs) newestCreatedMs = created;
    if (created < oldestCreatedMs) oldestCreatedMs = created;
    for (const { value, key } of runPreStages(plan.pre, message)) {
      let ts: number;
      if (options.eventTime) {
        // No usable time throws: the message is poison (window-placement.ts), never acked away unplaced.
        ts = eventTimeOf(options.eventTime, value, message.offset);
        if (maxEventMs === undefined || ts > maxEventMs) maxEventMs = ts;
      } else {
        ts = created;
      }
      const windows = assignWindows(plugin, ts, message.offset);
      if (merging) touched.add(openWindowStateKey(tag, key));
      else for (const w of windows) touched.add(windowStateKey(tag, w.start, key));
      entries.push({ input: payloadOf(value), userKey: key, offset: message.offset, ts, windows });
    }
  }
  return { entries, touchedKeys: [...touched], maxEventMs, newestCreatedMs, oldestCreatedMs };
}

/**
 * The clock that decides ripeness after this batch: processing time → the
 * newest createdAt; event time → the watermark advanced by this batch
 * (max event time − allowedLateness, never moving back; from the watermark
 * idled to at the batch's arrival with idleTimeoutMs). Undefined when no
 * event time has been seen yet.
 */
export function batchClock(plan: CompiledQuery, prepared: PreparedWindowBatch, stored: ReadonlyMap<string, StateRow>): number | undefined {
  const { options } = plan.window!;
  if (!options.eventTime) return Number.isFinite(prepared.newestCreatedMs) ? prepared.newestCreatedMs : undefined;
  const old = watermarkBefore(plan, prepared, stored);
  const candidate = prepared.maxEventMs === undefined ? undefined : prepared.maxEventMs - options.allowedLatenessMs;
  if (old === undefined) return candidate;
  if (candidate === undefined) return old;
  return Math.max(old, candidate);
}

interface WorkingRow {
  acc: any;
  windowStart: number;
  windowEnd: number;
  userKey: string;
  version: number;
}

/**
 * The state half of a window cycle: folds the prepared entries into the rows
 * read from state, closes every window ripe at `clock` (`windowEnd + grace <=
 * clock`, touched or merely stored), and answers the state ops (each with the
 * expected_version it was read at, 0 for new rows) and the emits. A value
 * whose window is still open (its end + grace is still after the horizon
 * from before this batch: grace admits; in processing time, also a window
 * whose row is stored) is folded into it. A value is late when its window
 * was already emitted: ripe at that horizon (lateHorizon: the watermark in
 * event time, the close horizon in processing time). Late values are
 * dropped, with onLate 'include' emitted at once as a window of their own,
 * or with an onLate sink answered in `late` (one per window missed).
 * Pure: recomputing after a VERSION_CONFLICT with fresh rows is just a re-call.
 */
export function foldWindowBatch(
  plan: CompiledQuery,
  prepared: PreparedWindowBatch,
  stored: ReadonlyMap<string, StateRow>,
  ripeRows: readonly StateRow[],
  clock: number | undefined,
): FoldResult {
  if (isMergingWindow(plan.window!.plugin)) return foldMergingBatch(plan as WindowPlan, prepared, stored, ripeRows, clock);
  const { options, tag } = (plan as WindowPlan).window;
  const reducer = (plan as WindowPlan).reducer;
  const horizon = lateHorizon(plan, prepared, stored);
  const working = new Map<string, WorkingRow>();
  const late = new Map<string, WorkingRow & { newestOffset: string }>();
  const lateContributions: LateContribution[] = [];
  let lateDropped = 0;

  for (const entry of prepared.entries) {
    let wasLate = false;
    for (const w of entry.windows) {
      const key = windowStateKey(tag, w.start, entry.userKey);
      if (horizon !== undefined && w.end <= horizon.closedThroughMs && !(horizon.storedRowIsOpen && (working.has(key) || stored.has(key)))) {
        wasLate = true;
        if (options.onLate === 'sink') lateContributions.push({ windowKey: key, entry, window: w, watermarkMs: horizon.watermarkMs, latenessMs: horizon.closedThroughMs - w.end });
        else if (options.onLate === 'include') {
          let row = late.get(key);
          if (!row) {
            row = { acc: reducer.init(), windowStart: w.start, windowEnd: w.end, userKey: entry.userKey, version: 0, newestOffset: entry.offset };
            late.set(key, row);
          }
          row.acc = userStep(reducer, entry, () => reducer.add(row!.acc, entry.input));
          if (BigInt(entry.offset) > BigInt(row.newestOffset)) row.newestOffset = entry.offset;
        }
        continue;
      }
      let row = working.get(key);
      if (!row) {
        const prev = stored.get(key);
        row = prev
          ? { acc: structuredClone(prev.value.acc), windowStart: prev.value.windowStart, windowEnd: prev.value.windowEnd, userKey: entry.userKey, version: prev.version }
          : { acc: reducer.init(), windowStart: w.start, windowEnd: w.end, userKey: entry.userKey, version: 0 };
        working.set(key, row);
      }
      row.acc = userStep(reducer, entry, () => reducer.add(row!.acc, entry.input));
    }
    if (wasLate && options.onLate !== 'include') lateDropped += 1;
  }

  const stateOps: StateOp[] = [];
  const emits: WindowEmit[] = [];
  const ripe = (windowEnd: number) => clock !== undefined && windowEnd + options.gracePeriodMs <= clock;
  for (const [key, row] of working) {
    if (ripe(row.windowEnd)) {
      emits.push({ identity: key, windowKey: key, windowStart: row.windowStart, windowEnd: row.windowEnd, userKey: row.userKey, value: reducer.result(row.acc) });
      if (row.version > 0) stateOps.push({ type: 'delete', key, expected_version: row.version });
    } else {
      stateOps.push({ type: 'upsert', key, value: { acc: row.acc, windowStart: row.windowStart, windowEnd: row.windowEnd }, expected_version: row.version });
    }
  }
  for (const r of ripeRows) {
    if (working.has(r.key) || r.key === WATERMARK_KEY) continue;
    const v = r.value ?? {};
    if (typeof v.windowEnd !== 'number' || !ripe(v.windowEnd)) continue;
    emits.push({ identity: r.key, windowKey: r.key, windowStart: v.windowStart, windowEnd: v.windowEnd, userKey: userKeyOfWindowKey(r.key), value: reducer.result(structuredClone(v.acc)) });
    stateOps.push({ type: 'delete', key: r.key, expected_version: r.version });
  }
  emits.sort(compareEmits);
  const closed = emits.length;
  for (const [key, row] of late) {
    emits.push({ identity: lateIdentity(key, row.newestOffset), windowKey: key, windowStart: row.windowStart, windowEnd: row.windowEnd, userKey: row.userKey, value: reducer.result(row.acc) });
  }

  stateOps.push(...watermarkOps(plan as WindowPlan, stored, clock, prepared));
  stateOps.push(...closeHorizonOps(options, tag, stored, clock === undefined ? undefined : clock - options.gracePeriodMs, closed));
  return { stateOps, emits, lateDropped, late: lateContributions };
}

/**
 * An idle flush (PROTOCOL §7.6): the rows state/get reported ripe become
 * emits and deletes carrying the versions they were read at.
 */
export function flushRipeRows(plan: CompiledQuery, rows: readonly StateRow[], ripeAtOrBefore: number): FoldResult {
  // Merging windows have inclusive ends: ripe once strictly past windowEnd + grace.
  if (isMergingWindow(plan.window!.plugin)) return flushMergingRows(plan as WindowPlan, rows, ripeAtOrBefore);
  const { options, tag } = plan.window!;
  const reducer = (plan as WindowPlan).reducer;
  const stateOps: StateOp[] = [];
  const emits: WindowEmit[] = [];
  for (const r of rows) {
    if (r.key === WATERMARK_KEY) continue;
    const v = r.value ?? {};
    if (typeof v.windowEnd !== 'number' || v.windowEnd > ripeAtOrBefore) continue;
    emits.push({ identity: r.key, windowKey: r.key, windowStart: v.windowStart, windowEnd: v.windowEnd, userKey: userKeyOfWindowKey(r.key), value: reducer.result(structuredClone(v.acc)) });
    stateOps.push({ type: 'delete', key: r.key, expected_version: r.version });
  }
  emits.sort(compareEmits);
  // Processing time: what this flush closes is emitted; a value for it read later is late (close-horizon.ts).
  stateOps.push(...closeHorizonOps(options, tag, rowsByKey(rows), ripeAtOrBefore, emits.length));
  return { stateOps, emits, lateDropped: 0, late: [] };
}

/**
 * The smallest `ripe_at_or_before` at which one of these rows (or, for a
 * merging window, one of its sessions) that is NOT ripe at `ripeAtOrBefore`
 * would become ripe; Infinity when none is left open. The idle flush uses it
 * to skip a quiet partition until then.
 */
export function nextRipeAt(plan: CompiledQuery, rows: readonly StateRow[], ripeAtOrBefore: number): number {
  const merging = isMergingWindow(plan.window!.plugin);
  let next = Infinity;
  for (const r of rows) {
    if (r.key === WATERMARK_KEY) continue;
    const ends = merging ? mergingRipeAts(r.value) : typeof r.value?.windowEnd === 'number' ? [r.value.windowEnd] : [];
    for (const at of ends) if (at > ripeAtOrBefore && at < next) next = at;
  }
  return next;
}

