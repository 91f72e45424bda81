import type { CompiledQuery } from '../plan/compile.js';
import type { WindowBounds } from '../plan/plugins.js';
import type { StateOp, StateRow } from '../context/wire.js';
import type { Reducer } from '../plan/reducer.js';
import { OperatorError } from '../commit/pre-ops.js';
import { watermarkAt, watermarkState, watermarkUpsert } from './event-time-idleness.js';
import { storedCloseHorizon } from './close-horizon.js';

// What the two window folds (fixed windows in window-batch.ts, merging
// windows in merging-fold.ts) share: their input, their output and the
// watermark row.

/** One value headed into the window, with the windows it falls in. */
export interface WindowEntry {
  input: unknown;
  userKey: string;
  offset: string;
  /** The timestamp the windows were assigned from (event time or createdAt). */
  ts: number;
  windows: WindowBounds[];
}

/** The per-message half of a window cycle: runs once per batch, before any state read. */
export interface PreparedWindowBatch {
  entries: WindowEntry[];
  /** State keys of every window the batch touches (what state/get must return). */
  touchedKeys: string[];
  /** Newest event time of the batch (event time only). */
  maxEventMs?: number;
  /** Newest broker createdAt of the batch: the processing-time clock. */
  newestCreatedMs: number;
  /** Oldest broker createdAt of the batch: when event-time idleness ended, if it had begun. */
  oldestCreatedMs: number;
}

import type { WindowEmit } from '../plan/plugins.js';

export type { WindowEmit };

/**
 * A value the fold did not count because its window had already closed, kept
 * for the `onLate` sink (late-record.ts turns it into a LateRecord).
 */
export interface LateContribution {
  /** State key of the window it missed (its identity's base). */
  windowKey: string;
  entry: WindowEntry;
  window: WindowBounds;
  /** The watermark it was judged late against (see {@link LateHorizon}). */
  watermarkMs: number;
  /** How far the horizon had passed the window's close: `closedThroughMs − window.end` (≥ 0; > 0 for a merging window). */
  latenessMs: number;
}

/**
 * What a batch is judged late against: the clock at which the partition's
 * windows were last closed, before this batch. A window is already emitted
 * (a value for it, whose row is gone, is late) when its end is at or before
 * `closedThroughMs` (strictly before for a merging window, whose end is
 * inclusive) — exactly the windows a close at that clock makes ripe.
 */
interface LateHorizon {
  /**
   * Event time: the watermark before the batch (max event time −
   * allowedLateness, or idled forward). Processing time: the clock of the
   * last close (`closedThroughMs + gracePeriod`).
   */
  watermarkMs: number;
  /** `watermarkMs − gracePeriod`: windows ending at or before it were ripe, so closed. */
  closedThroughMs: number;
  /**
   * Processing time: a window whose row is still stored was not closed at
   * the horizon (a close may leave a window open, e.g. one a message in
   * flight still belongs to), so it is open whatever its end. Event time: no
   * — a window ripe at the watermark from before the batch is judged closed
   * whether or not a flush has run yet, so the verdict does not depend on
   * its timing (with idleTimeoutMs the watermark idles without a write).
   */
  storedRowIsOpen: boolean;
}

/** The horizon a batch's values are judged late against, or undefined when no window of the partition has closed yet. */
export function lateHorizon(plan: CompiledQuery, prepared: PreparedWindowBatch, stored: ReadonlyMap<string, StateRow>): LateHorizon | undefined {
  const { options, tag } = plan.window!;
  if (options.eventTime) {
    const wm = watermarkBefore(plan, prepared, stored);
    return wm === undefined ? undefined : { watermarkMs: wm, closedThroughMs: wm - options.gracePeriodMs, storedRowIsOpen: false };
  }
  const closed = storedCloseHorizon(tag, stored);
  return closed === undefined ? undefined : { watermarkMs: closed + options.gracePeriodMs, closedThroughMs: closed, storedRowIsOpen: true };
}

export interface FoldResult {
  stateOps: StateOp[];
  emits: WindowEmit[];
  /** Source messages late and not folded (onLate 'drop' or a sink). */
  lateDropped: number;
  /** With an onLate sink: every late contribution, in batch order (else empty). */
  late: LateContribution[];
}

/** A compiled query that has a window and its reducer. */
export type WindowPlan = Required<Pick<CompiledQuery, 'window' | 'reducer'>> & CompiledQuery;

/** Runs a user reducer step for one entry; a throw names the entry's source message (poison). */
export function userStep<T>(reducer: Reducer, entry: WindowEntry, step: () => T): T {
  try {
    return step();
  } catch (err) {
    throw new OperatorError(reducer.kind, err, entry.offset);
  }
}

/** Emit order: by end, then start, then key. */
export function compareEmits(a: WindowEmit, b: WindowEmit): number {
  return a.windowEnd - b.windowEnd || a.windowStart - b.windowStart || (a.windowKey < b.windowKey ? -1 : a.windowKey > b.windowKey ? 1 : 0);
}


/**
 * Event time: the watermark a batch is judged against — the stored one, or
 * with idleTimeoutMs the one the partition had idled to when the batch's
 * first message arrived (its createdAt: deterministic, whenever the batch
 * is processed). Undefined before the first event.
 */
export function watermarkBefore(plan: CompiledQuery, prepared: PreparedWindowBatch, stored: ReadonlyMap<string, StateRow>): number | undefined {
  return watermarkAt(plan.window!.options, watermarkState(stored), prepared.oldestCreatedMs);
}

/**
 * Event time: the upsert of `__wm__` when this batch moved the watermark (or,
 * with idleTimeoutMs, its quiet anchor: the batch's newest createdAt), else nothing.
 */
export function watermarkOps(plan: WindowPlan, stored: ReadonlyMap<string, StateRow>, clock: number | undefined, prepared: PreparedWindowBatch): StateOp[] {
  if (!plan.window.options.eventTime || clock === undefined) return [];
  return watermarkUpsert(plan.window.options, stored, clock, prepared.newestCreatedMs);
}
