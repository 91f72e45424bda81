import type { MergingWindowPlugin, WindowBounds } from '../plan/plugins.js';
import type { StateOp, StateRow } from '../context/wire.js';
import type { Reducer } from '../plan/reducer.js';
import { WATERMARK_KEY, openWindowStateKey, userKeyOfWindowKey, windowStateKey } from '../plan/keys.js';
import { lateIdentity } from '../commit/transaction-id.js';
import { rowsByKey } from '../context/state-api.js';
import { closeHorizonOps } from './close-horizon.js';
import {
  compareEmits,
  lateHorizon,
  userStep,
  watermarkOps,
  type FoldResult,
  type LateContribution,
  type PreparedWindowBatch,
  type WindowEmit,
  type WindowPlan,
} from './window-fold-shared.js';

// The fold of a merging window (MergingWindowPlugin, e.g. sessions), under
// the end rule the plugin declares: inclusive ends, one open row per key.

/**
 * One open window of a merging window. A key's row holds the newest in the
 * PROTOCOL §7.6 fields and, only while an older window of the key is still
 * inside its grace period, that older one in `earlier` (oldest first).
 */
interface OpenWindow {
  start: number;
  end: number;
  last: number;
  acc: any;
}

function pluginOf(plan: WindowPlan): MergingWindowPlugin {
  return plan.window.plugin as MergingWindowPlugin;
}

function openWindowsOfRow(value: any): OpenWindow[] {
  const out: OpenWindow[] = [];
  if (!value || typeof value.windowEnd !== 'number') return out;
  for (const e of Array.isArray(value.earlier) ? value.earlier : []) {
    out.push({ start: e.sessionStart, end: e.windowEnd, last: e.lastEventTime, acc: e.acc });
  }
  out.push({ start: value.sessionStart, end: value.windowEnd, last: value.lastEventTime, acc: value.acc });
  return out;
}

/** The stored form (PROTOCOL §7.6 names the fields after sessions, the first merging window). */
function storedValue(w: OpenWindow) {
  return { acc: w.acc, sessionStart: w.start, lastEventTime: w.last, windowEnd: w.end };
}

/** The row value for the windows left open (sorted by start), newest in the main fields. */
function rowOfOpenWindows(windows: OpenWindow[]) {
  const newest = windows[windows.length - 1]!;
  const earlier = windows.slice(0, -1).map(storedValue);
  return earlier.length ? { ...storedValue(newest), earlier } : storedValue(newest);
}

/** The identity of a merged window (PROTOCOL §7.6): `<tag>␟<start ISO>␟<userKey>`, also its ctx.windowKey. */
function mergedEmit(tag: string, userKey: string, w: OpenWindow, reducer: Reducer): WindowEmit {
  const identity = windowStateKey(tag, w.start, userKey);
  return { identity, windowKey: identity, windowStart: w.start, windowEnd: w.end, userKey, value: reducer.result(structuredClone(w.acc)) };
}

/** Inclusive ends: a merging window is ripe once the clock is strictly past `end + grace`. */
function ripeAfter(clock: number | undefined, graceMs: number): (end: number) => boolean {
  return (end) => clock !== undefined && end + graceMs < clock;
}

/**
 * Closes the ripe windows of rows nobody touched in this batch: emits them,
 * then deletes the row or rewrites it with the windows still open.
 */
function closeMergingRows(plan: WindowPlan, rows: readonly StateRow[], ripe: (end: number) => boolean, skip?: ReadonlyMap<string, unknown>): { stateOps: StateOp[]; emits: WindowEmit[] } {
  const stateOps: StateOp[] = [];
  const emits: WindowEmit[] = [];
  for (const r of rows) {
    if (r.key === WATERMARK_KEY || skip?.has(r.key)) continue;
    const windows = openWindowsOfRow(r.value);
    const closing = windows.filter((w) => ripe(w.end));
    if (closing.length === 0) continue;
    const userKey = userKeyOfWindowKey(r.key);
    for (const w of closing) emits.push(mergedEmit(plan.window.tag, userKey, w, plan.reducer));
    const open = windows.filter((w) => !ripe(w.end));
    if (open.length === 0) stateOps.push({ type: 'delete', key: r.key, expected_version: r.version });
    else stateOps.push({ type: 'upsert', key: r.key, value: rowOfOpenWindows(open), expected_version: r.version });
  }
  return { stateOps, emits };
}

/**
 * Asks the plugin to merge a key's open windows with one new window and
 * answers the merged window the new one ended up in, with the open windows it
 * absorbed (as the plugin says, by index: core never guesses by containment).
 */
function mergeInto(plugin: MergingWindowPlugin, open: readonly OpenWindow[], w: WindowBounds): { target: WindowBounds; members: OpenWindow[] } {
  const inputs: WindowBounds[] = open.map((o) => ({ start: o.start, end: o.end }));
  const newIndex = inputs.push({ start: w.start, end: w.end }) - 1;
  const target = plugin.merge(inputs).find((m) => m.merged.includes(newIndex));
  if (!target) throw new Error(`window plugin "${plugin.kind}": merge() answered no window made of input #${newIndex}`);
  const members = target.merged.filter((i) => i !== newIndex).map((i) => open[i]!);
  return { target: { start: target.start, end: target.end }, members };
}

/**
 * The fold of a merging window. Per key, each event's window is merged (by
 * the plugin's `merge`) with the key's open windows: joining one adds to its
 * accumulator; bridging several merges their accumulators with the reducer's
 * `merge` first. Every event of the batch is folded BEFORE anything closes,
 * so an out-of-order event in the same batch can still bridge two windows.
 * Then a window closes when the clock is strictly past `windowEnd + grace`
 * (the end is inclusive: an event at exactly windowEnd still extends it). An
 * event that joins no open window and whose own window was already ripe at
 * the horizon from before the batch (`windowEnd + grace <` the watermark in
 * event time, the close horizon in processing time) is late (drop / include /
 * the onLate sink); one whose window grace still holds open opens it.
 */
export function foldMergingBatch(
  plan: WindowPlan,
  prepared: PreparedWindowBatch,
  stored: ReadonlyMap<string, StateRow>,
  ripeRows: readonly StateRow[],
  clock: number | undefined,
): FoldResult {
  const { options, tag } = plan.window;
  const plugin = pluginOf(plan);
  const reducer = plan.reducer;
  const horizon = lateHorizon(plan, prepared, stored);
  const working = new Map<string, { userKey: string; version: number; windows: OpenWindow[] }>();
  const late = new Map<string, { acc: any; start: number; end: number; userKey: string; newestOffset: string }>();
  const lateContributions: LateContribution[] = [];
  let lateDropped = 0;

  for (const entry of prepared.entries) {
    const key = openWindowStateKey(tag, entry.userKey);
    let row = working.get(key);
    if (!row) {
      const prev = stored.get(key);
      row = { userKey: entry.userKey, version: prev?.version ?? 0, windows: prev ? openWindowsOfRow(structuredClone(prev.value)) : [] };
      working.set(key, row);
    }
    let wasLate = false;
    for (const w of entry.windows) {
      const { target, members } = mergeInto(plugin, row.windows, w);
      if (members.length === 0 && horizon !== undefined && w.end < horizon.closedThroughMs) {
        wasLate = true;
        if (options.onLate === 'sink') {
          lateContributions.push({ windowKey: windowStateKey(tag, w.start, entry.userKey), entry, window: w, watermarkMs: horizon.watermarkMs, latenessMs: horizon.closedThroughMs - w.end });
        }
        else if (options.onLate === 'include') {
          const lateKey = windowStateKey(tag, w.start, entry.userKey);
          let l = late.get(lateKey);
          if (!l) {
            l = { acc: reducer.init(), start: w.start, end: w.end, userKey: entry.userKey, newestOffset: entry.offset };
            late.set(lateKey, l);
          }
          l.acc = userStep(reducer, entry, () => reducer.add(l!.acc, entry.input));
          if (BigInt(entry.offset) > BigInt(l.newestOffset)) l.newestOffset = entry.offset;
        }
        continue;
      }
      let acc: any = members.length ? members[0]!.acc : reducer.init();
      acc = userStep(reducer, entry, () => {
        let a = acc;
        for (const m of members.slice(1)) a = reducer.merge!(a, m.acc);
        return reducer.add(a, entry.input);
      });
      const last = Math.max(entry.ts, ...members.map((m) => m.last));
      row.windows = row.windows.filter((o) => !members.includes(o));
      row.windows.push({ start: target.start, end: target.end, last, acc });
      row.windows.sort((a, b) => a.start - b.start);
    }
    if (wasLate && options.onLate !== 'include') lateDropped += 1;
  }

  const ripe = ripeAfter(clock, options.gracePeriodMs);
  const stateOps: StateOp[] = [];
  const emits: WindowEmit[] = [];
  for (const [key, row] of working) {
    for (const w of row.windows) if (ripe(w.end)) emits.push(mergedEmit(tag, row.userKey, w, reducer));
    const open = row.windows.filter((w) => !ripe(w.end));
    if (open.length) stateOps.push({ type: 'upsert', key, value: rowOfOpenWindows(open), expected_version: row.version });
    else if (row.version > 0) stateOps.push({ type: 'delete', key, expected_version: row.version });
  }
  const untouched = closeMergingRows(plan, ripeRows, ripe, working);
  stateOps.push(...untouched.stateOps);
  emits.push(...untouched.emits);
  emits.sort(compareEmits);
  const closed = emits.length;
  for (const [key, l] of late) {
    emits.push({ identity: lateIdentity(key, l.newestOffset), windowKey: key, windowStart: l.start, windowEnd: l.end, userKey: l.userKey, value: reducer.result(l.acc) });
  }
  stateOps.push(...watermarkOps(plan, stored, clock, prepared));
  stateOps.push(...closeHorizonOps(options, tag, stored, clock === undefined ? undefined : clock - options.gracePeriodMs, closed));
  return { stateOps, emits, lateDropped, late: lateContributions };
}

/** An idle flush of merging rows: every open window strictly past `ripeAtOrBefore` closes. */
export function flushMergingRows(plan: WindowPlan, rows: readonly StateRow[], ripeAtOrBefore: number): FoldResult {
  const { stateOps, emits } = closeMergingRows(plan, rows, (end) => end < ripeAtOrBefore);
  emits.sort(compareEmits);
  stateOps.push(...closeHorizonOps(plan.window.options, plan.window.tag, rowsByKey(rows), ripeAtOrBefore, emits.length));
  return { stateOps, emits, lateDropped: 0, late: [] };
}

/** The `ripe_at_or_before` values at which each open window of a merging row ripens (its end + 1: ends are inclusive). */
export function mergingRipeAts(value: unknown): number[] {
  return openWindowsOfRow(value).map((w) => w.end + 1);
}
