import type { CompiledQuery } from './compile.js';
import type { WindowBounds } from './plugins.js';
import type { SourceMessage } from './source-message.js';
import type { StateOp, StateRow } from './wire.js';
import type { Reducer } from './reducer.js';
import { payloadOf } from './source-message.js';
import { runPreStages } from './pre-ops.js';
import { toEpochMs } from './event-time.js';
import { WATERMARK_KEY, openWindowStateKey, userKeyOfWindowKey, windowStateKey } from './keys.js';
import { lateIdentity } from './transaction-id.js';
import { OperatorError } from './pre-ops.js';

/** One value headed into the window, with the windows it falls in. */
interface WindowEntry {
  input: unknown;
  userKey: string;
  offset: string;
  /** The timestamp the windows were assigned from (event time or createdAt). */
  ts: number;
  windows: WindowBounds[];
}

/** A message skipped because its event time was unusable (S23). */
export interface SkippedMessage {
  message: SourceMessage;
  error: Error;
}

/** The per-message half of a window cycle: runs once per batch, before any state read. */
export interface PreparedWindowBatch {
  entries: WindowEntry[];
  /** State keys of every window the batch touches (what state/get must return). */
  touchedKeys: string[];
  skipped: SkippedMessage[];
  /** Newest event time of the batch (event time only). */
  maxEventMs?: number;
  /** Newest broker createdAt of the batch: the processing-time clock. */
  newestCreatedMs: number;
}

/** A closed window leaving the reducer. */
export interface WindowEmit {
  identity: string;
  windowKey: string;
  windowStart: number;
  windowEnd: number;
  userKey: string;
  value: unknown;
}

export interface FoldResult {
  stateOps: StateOp[];
  emits: WindowEmit[];
  lateDropped: number;
}

type Plan = Required<Pick<CompiledQuery, 'window' | 'reducer'>> & CompiledQuery;

/** Runs a user reducer step for one entry; a throw names the entry's source message (poison). */
function userStep<T>(reducer: Reducer, entry: WindowEntry, step: () => T): T {
  try {
    return step();
  } catch (err) {
    throw new OperatorError(reducer.kind, err, entry.offset);
  }
}

export function prepareWindowBatch(plan: CompiledQuery, messages: readonly SourceMessage[]): PreparedWindowBatch {
  const { plugin, options } = plan.window!;
  const entries: WindowEntry[] = [];
  const touched = new Set<string>();
  const skipped: SkippedMessage[] = [];
  let maxEventMs: number | undefined;
  let newestCreatedMs = -Infinity;
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
    for (const { value, key } of runPreStages(plan.pre, message)) {
      let ts: number | undefined;
      if (options.eventTime) {
        try {
          ts = toEpochMs(options.eventTime(value));
        } catch {
          ts = undefined;
        }
        if (ts === undefined) {
          skipped.push({ message, error: new Error(`eventTime returned no usable time for message at offset ${message.offset}`) });
          continue;
        }
        if (maxEventMs === undefined || ts > maxEventMs) maxEventMs = ts;
      } else {
        ts = created;
      }
      const windows = plugin.assign(ts);
      if (plugin.merge) touched.add(openWindowStateKey(plugin.tag, key));
      else for (const w of windows) touched.add(windowStateKey(plugin.tag, w.start, key));
      entries.push({ input: payloadOf(value), userKey: key, offset: message.offset, ts, windows });
    }
  }
  return { entries, touchedKeys: [...touched], skipped, maxEventMs, newestCreatedMs };
}

/** The stored watermark (event time), if any. */
export function storedWatermark(rows: ReadonlyMap<string, StateRow>): number | undefined {
  const v = rows.get(WATERMARK_KEY)?.value?.eventTimeMs;
  return typeof v === 'number' ? v : undefined;
}

/**
 * The clock that decides ripeness after this batch: processing time → the
 * newest createdAt; event time → the watermark advanced by this batch
 * (max event time − allowedLateness, never moving back). Undefined when no
 * event time has been seen yet.
 */
export function batchClock(plan: CompiledQuery, prepared: PreparedWindowBatch, stored: ReadonlyMap<string, StateRow>): number | undefined {
  const { options } = plan.window!;
  if (!options.eventTime) return Number.isFinite(prepared.newestCreatedMs) ? prepared.newestCreatedMs : undefined;
  const old = storedWatermark(stored);
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

function compareEmits(a: WindowEmit, b: WindowEmit): number {
  return a.windowEnd - b.windowEnd || a.windowStart - b.windowStart || (a.windowKey < b.windowKey ? -1 : a.windowKey > b.windowKey ? 1 : 0);
}

/**
 * The state half of a window cycle: folds the prepared entries into the rows
 * read from state, closes every window ripe at `clock` (`windowEnd + grace <=
 * clock`, touched or merely stored), and answers the state ops (each with the
 * expected_version it was read at, 0 for new rows) and the emits. Late events
 * (event time, windowEnd <= the watermark from before this batch) are dropped
 * or, with onLate 'include', emitted at once as a window of their own.
 * Pure: recomputing after a VERSION_CONFLICT with fresh rows is just a re-call.
 */
export function foldWindowBatch(
  plan: CompiledQuery,
  prepared: PreparedWindowBatch,
  stored: ReadonlyMap<string, StateRow>,
  ripeRows: readonly StateRow[],
  clock: number | undefined,
): FoldResult {
  if ((plan as Plan).window.plugin.merge) return foldMergingBatch(plan as Plan, prepared, stored, ripeRows, clock);
  const { plugin, options } = (plan as Plan).window;
  const reducer = (plan as Plan).reducer;
  const oldWm = options.eventTime ? storedWatermark(stored) : undefined;
  const working = new Map<string, WorkingRow>();
  const late = new Map<string, WorkingRow & { newestOffset: string }>();
  let lateDropped = 0;

  for (const entry of prepared.entries) {
    let wasLate = false;
    for (const w of entry.windows) {
      const key = windowStateKey(plugin.tag, w.start, entry.userKey);
      if (oldWm !== undefined && w.end <= oldWm) {
        wasLate = true;
        if (options.onLate === 'include') {
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
    if (wasLate && options.onLate === 'drop') lateDropped += 1;
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
  for (const [key, row] of late) {
    emits.push({ identity: lateIdentity(key, row.newestOffset), windowKey: key, windowStart: row.windowStart, windowEnd: row.windowEnd, userKey: row.userKey, value: reducer.result(row.acc) });
  }

  if (options.eventTime && clock !== undefined && clock !== oldWm) {
    const wmRow = stored.get(WATERMARK_KEY);
    stateOps.push({ type: 'upsert', key: WATERMARK_KEY, value: { eventTimeMs: clock }, expected_version: wmRow ? wmRow.version : 0 });
  }
  return { stateOps, emits, lateDropped };
}

/**
 * An idle flush (PROTOCOL §7.6): the rows state/get reported ripe become
 * emits and deletes carrying the versions they were read at.
 */
export function flushRipeRows(plan: CompiledQuery, rows: readonly StateRow[], ripeAtOrBefore: number): FoldResult {
  if ((plan as Plan).window.plugin.merge) {
    // Merging windows have inclusive ends: ripe once strictly past windowEnd + grace.
    const { stateOps, emits } = closeSessionRows(plan as Plan, rows, (end) => end < ripeAtOrBefore);
    emits.sort(compareEmits);
    return { stateOps, emits, lateDropped: 0 };
  }
  const reducer = (plan as Plan).reducer;
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
  return { stateOps, emits, lateDropped: 0 };
}

/**
 * The smallest `ripe_at_or_before` at which one of these rows (or, for a
 * merging window, one of its sessions) that is NOT ripe at `ripeAtOrBefore`
 * would become ripe; Infinity when none is left open. The idle flush uses it
 * to skip a quiet partition until then.
 */
export function nextRipeAt(plan: CompiledQuery, rows: readonly StateRow[], ripeAtOrBefore: number): number {
  const merging = !!(plan as Plan).window.plugin.merge;
  let next = Infinity;
  for (const r of rows) {
    if (r.key === WATERMARK_KEY) continue;
    const ends = merging ? sessionsOfRow(r.value).map((x) => x.end + 1) : typeof r.value?.windowEnd === 'number' ? [r.value.windowEnd] : [];
    for (const at of ends) if (at > ripeAtOrBefore && at < next) next = at;
  }
  return next;
}

/**
 * One open session of a merging window. A key's row holds the newest in the
 * PROTOCOL §7.6 fields and, only while an older session of the key is still
 * inside its grace period, that older one in `earlier` (oldest first).
 */
interface Session {
  start: number;
  end: number;
  last: number;
  acc: any;
}

function sessionsOfRow(value: any): Session[] {
  const out: Session[] = [];
  if (!value || typeof value.windowEnd !== 'number') return out;
  for (const e of Array.isArray(value.earlier) ? value.earlier : []) {
    out.push({ start: e.sessionStart, end: e.windowEnd, last: e.lastEventTime, acc: e.acc });
  }
  out.push({ start: value.sessionStart, end: value.windowEnd, last: value.lastEventTime, acc: value.acc });
  return out;
}

function sessionValue(s: Session) {
  return { acc: s.acc, sessionStart: s.start, lastEventTime: s.last, windowEnd: s.end };
}

/** The row value for the sessions left open (sorted by start), newest in the main fields. */
function rowOfSessions(sessions: Session[]) {
  const newest = sessions[sessions.length - 1]!;
  const earlier = sessions.slice(0, -1).map(sessionValue);
  return earlier.length ? { ...sessionValue(newest), earlier } : sessionValue(newest);
}

/** The identity of a session (PROTOCOL §7.6): `<tag>␟<sessionStart ISO>␟<userKey>`, also its ctx.windowKey. */
function sessionEmit(tag: string, userKey: string, s: Session, reducer: Reducer): WindowEmit {
  const identity = windowStateKey(tag, s.start, userKey);
  return { identity, windowKey: identity, windowStart: s.start, windowEnd: s.end, userKey, value: reducer.result(structuredClone(s.acc)) };
}

/**
 * Closes the ripe sessions of rows nobody touched in this batch: emits them,
 * then deletes the row or rewrites it with the sessions still open.
 */
function closeSessionRows(plan: Plan, rows: readonly StateRow[], ripe: (end: number) => boolean, skip?: ReadonlyMap<string, unknown>): { stateOps: StateOp[]; emits: WindowEmit[] } {
  const stateOps: StateOp[] = [];
  const emits: WindowEmit[] = [];
  for (const r of rows) {
    if (r.key === WATERMARK_KEY || skip?.has(r.key)) continue;
    const sessions = sessionsOfRow(r.value);
    const closing = sessions.filter((s) => ripe(s.end));
    if (closing.length === 0) continue;
    const userKey = userKeyOfWindowKey(r.key);
    for (const s of closing) emits.push(sessionEmit(plan.window.plugin.tag, userKey, s, plan.reducer));
    const open = sessions.filter((s) => !ripe(s.end));
    if (open.length === 0) stateOps.push({ type: 'delete', key: r.key, expected_version: r.version });
    else stateOps.push({ type: 'upsert', key: r.key, value: rowOfSessions(open), expected_version: r.version });
  }
  return { stateOps, emits };
}

/**
 * The fold of a merging window (sessions). Per key, each event's window is
 * merged (by the plugin's `merge`) with the key's open sessions: joining one
 * adds to its accumulator; bridging several merges their accumulators with
 * the reducer's `merge` first. Every event of the batch is folded BEFORE
 * anything closes, so an out-of-order event in the same batch can still
 * bridge two sessions. Then a session closes when the clock is strictly past
 * `windowEnd + grace` (the end is inclusive: an event at exactly windowEnd
 * still extends it). An event that joins no open session and whose own
 * window ended before the stored watermark is late (drop / include).
 */
function foldMergingBatch(
  plan: Plan,
  prepared: PreparedWindowBatch,
  stored: ReadonlyMap<string, StateRow>,
  ripeRows: readonly StateRow[],
  clock: number | undefined,
): FoldResult {
  const { plugin, options } = plan.window;
  const reducer = plan.reducer;
  const oldWm = options.eventTime ? storedWatermark(stored) : undefined;
  const working = new Map<string, { userKey: string; version: number; sessions: Session[] }>();
  const late = new Map<string, { acc: any; start: number; end: number; userKey: string; newestOffset: string }>();
  let lateDropped = 0;

  for (const entry of prepared.entries) {
    const key = openWindowStateKey(plugin.tag, entry.userKey);
    let row = working.get(key);
    if (!row) {
      const prev = stored.get(key);
      row = { userKey: entry.userKey, version: prev?.version ?? 0, sessions: prev ? sessionsOfRow(structuredClone(prev.value)) : [] };
      working.set(key, row);
    }
    let wasLate = false;
    for (const w of entry.windows) {
      const merged = plugin.merge!([...row.sessions.map((s) => ({ start: s.start, end: s.end })), { start: w.start, end: w.end }]);
      const target = merged.find((m) => m.start <= w.start && w.end <= m.end) ?? { start: w.start, end: w.end };
      const members = row.sessions.filter((s) => target.start <= s.start && s.end <= target.end);
      if (members.length === 0 && oldWm !== undefined && w.end < oldWm) {
        wasLate = true;
        if (options.onLate === 'include') {
          const lateKey = windowStateKey(plugin.tag, w.start, entry.userKey);
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
      row.sessions = row.sessions.filter((s) => !members.includes(s));
      row.sessions.push({ start: target.start, end: target.end, last, acc });
      row.sessions.sort((a, b) => a.start - b.start);
    }
    if (wasLate && options.onLate === 'drop') lateDropped += 1;
  }

  const ripe = (end: number) => clock !== undefined && end + options.gracePeriodMs < clock;
  const stateOps: StateOp[] = [];
  const emits: WindowEmit[] = [];
  for (const [key, row] of working) {
    for (const s of row.sessions) if (ripe(s.end)) emits.push(sessionEmit(plugin.tag, row.userKey, s, reducer));
    const open = row.sessions.filter((s) => !ripe(s.end));
    if (open.length) stateOps.push({ type: 'upsert', key, value: rowOfSessions(open), expected_version: row.version });
    else if (row.version > 0) stateOps.push({ type: 'delete', key, expected_version: row.version });
  }
  const untouched = closeSessionRows(plan, ripeRows, ripe, working);
  stateOps.push(...untouched.stateOps);
  emits.push(...untouched.emits);
  emits.sort(compareEmits);
  for (const [key, l] of late) {
    emits.push({ identity: lateIdentity(key, l.newestOffset), windowKey: key, windowStart: l.start, windowEnd: l.end, userKey: l.userKey, value: reducer.result(l.acc) });
  }
  if (options.eventTime && clock !== undefined && clock !== oldWm) {
    const wmRow = stored.get(WATERMARK_KEY);
    stateOps.push({ type: 'upsert', key: WATERMARK_KEY, value: { eventTimeMs: clock }, expected_version: wmRow ? wmRow.version : 0 });
  }
  return { stateOps, emits, lateDropped };
}
