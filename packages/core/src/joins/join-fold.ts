import type { ResolvedJoinOptions } from '../plan/join-options.js';
import type { SourceMessage } from '../context/source-message.js';
import type { StateOp, StateRow } from '../context/wire.js';
import { JOIN_CLOCK_KEY, JOIN_PREFIX, SEP, joinRecordsKey, unescapeKeyPart } from '../plan/keys.js';
import { toEpochMs } from '../plan/event-time.js';
import { OperatorError } from '../commit/pre-ops.js';

// The interval join's fold, pure: one cycle's messages of either side against
// the records the shard holds. Each side keeps its newest time (its
// watermark); a record more than the grace behind its own side's watermark is
// late. A record pairs with every held record of the other side with the same
// key whose time is within the bound; then it is held itself. A held record
// leaves once the OTHER side's watermark, less the grace, is past its time
// plus the bound: any record of that side still to come is later than that
// (or late), so it can pair with nothing more. A left join emits the left
// record that paired with nothing as it leaves. The pairs are therefore the
// same whatever the batches or the order the two sides are processed in:
// every couple of records, neither late, with equal keys and times at most
// `within` apart.

type JoinSide = 'left' | 'right';

/** A record a join holds (the value of `join␟<side>␟<key>` rows: `{records}`). */
interface HeldRecord {
  offset: string;
  /** Epoch ms: the event time, or the broker's createdAt. */
  time: number;
  /** The message's payload. */
  value: unknown;
  /** A left record that has paired (a left join emits the others with a null right side). */
  matched?: true;
}

/**
 * The bookkeeping row `__join__`: each side's watermark (null: none yet), the
 * partition's name, and `due`: per side, the earliest time + within of the
 * records it holds (null: none held). A cycle whose marks pass neither side's
 * due leaves every record where it is, so it reads only the rows of its own
 * keys; rows written before `due` existed read as unknown (read everything).
 */
interface JoinClock {
  left: number | null;
  right: number | null;
  partition: string;
  due: { left: number | null; right: number | null };
}

/** One side's messages of a cycle, in offset order. */
export interface JoinInput {
  side: JoinSide;
  messages: readonly SourceMessage[];
}

/** A pair, or an unmatched left record, with its deterministic identity (PROTOCOL §7.6). */
interface JoinOutput {
  /** `pair␟<left offset>␟<right offset>` or `left␟<left offset>`. */
  identity: string;
  value: unknown;
  key: string;
  /** The offset of the message whose side this cycle reads, for a pair found now; the left record's for an unmatched one. */
  offset: string;
}

export interface JoinFold {
  stateOps: StateOp[];
  outputs: JoinOutput[];
  /** Records dropped as late. */
  late: number;
  /** Records held after the fold in the rows it was given (all of them when it was given all), per side. */
  held: { left: number; right: number };
  /**
   * Given only the rows of the cycle's keys: a held record elsewhere may
   * leave in this cycle (or `due` is unknown), so nothing of this fold
   * counts; fold again with every row of the shard.
   */
  needsAllRows: boolean;
  /** Broker time past which a record the fold leaves held may leave on the clock alone (the earliest due + grace); null: none held. */
  expiresAt: number | null;
}

const other = (side: JoinSide): JoinSide => (side === 'left' ? 'right' : 'left');

function timeOf(opts: ResolvedJoinOptions, side: JoinSide, message: SourceMessage): number {
  const extract = side === 'left' ? opts.eventTimeLeft : opts.eventTimeRight;
  if (!extract) return Date.parse(message.createdAt);
  let raw: unknown;
  try {
    raw = extract(message.data);
  } catch (err) {
    throw new OperatorError('join', err, message.offset);
  }
  const ms = toEpochMs(raw);
  if (ms === undefined) throw new OperatorError('join', new Error(`eventTime (${side}) returned no time (a Date, epoch ms or an ISO string)`), message.offset);
  return ms;
}

function keyOf(opts: ResolvedJoinOptions, side: JoinSide, message: SourceMessage): string {
  try {
    return String((side === 'left' ? opts.keyLeft : opts.keyRight)(message.data));
  } catch (err) {
    throw new OperatorError('join', err, message.offset);
  }
}

function select(opts: ResolvedJoinOptions, left: unknown, right: unknown, offset: string): unknown {
  try {
    return opts.select(left, right);
  } catch (err) {
    throw new OperatorError('join', err, offset);
  }
}

/** The side and user key of a records row, or undefined for any other row. */
function parseRecordsKey(key: string): { side: JoinSide; userKey: string } | undefined {
  if (!key.startsWith(JOIN_PREFIX)) return undefined;
  const rest = key.slice(JOIN_PREFIX.length);
  const at = rest.indexOf(SEP);
  const side = rest.slice(0, at);
  if (side !== 'left' && side !== 'right') return undefined;
  return { side, userKey: unescapeKeyPart(rest.slice(at + 1)) };
}

/**
 * The state rows a cycle over `inputs` reads first: `__join__` and both
 * sides' records rows of every key the inputs carry. Pairing needs no other
 * row; expiry does only when a record leaves (JoinClock's `due`).
 */
export function joinStateKeys(opts: ResolvedJoinOptions, inputs: readonly JoinInput[]): string[] {
  const keys = new Set([JOIN_CLOCK_KEY]);
  for (const { side, messages } of inputs) {
    for (const m of messages) {
      const key = keyOf(opts, side, m);
      keys.add(joinRecordsKey('left', key)).add(joinRecordsKey('right', key));
    }
  }
  return [...keys];
}

/** A fold given only some rows that cannot finish on them: nothing of it counts. */
const NEEDS_ALL_ROWS: JoinFold = Object.freeze({ stateOps: [], outputs: [], late: 0, held: { left: 0, right: 0 }, needsAllRows: true, expiresAt: null });

/** Whether a record of `side` may leave once the other side's watermark is `mark`: the earliest `due` has passed. */
function expiryDue(opts: ResolvedJoinOptions, due: number | null, mark: number | null): boolean {
  return due !== null && mark !== null && mark - opts.graceMs > due;
}

/**
 * One cycle's fold over a shard's rows: all of them (`allRows`), or only
 * those of joinStateKeys (then, when a record elsewhere may leave, it answers
 * needsAllRows and nothing else counts). Answers the state ops (every one a
 * compare-and-set, and `__join__` written by every cycle, so two cycles of
 * one shard never both commit from the same rows), the outputs and the late
 * count.
 */
export function foldJoin(opts: ResolvedJoinOptions, stored: ReadonlyMap<string, StateRow>, inputs: readonly JoinInput[], partition: string, allRows = true): JoinFold {
  return fold(opts, stored, inputs, partition, allRows);
}

/**
 * An idle flush's fold over every row of a shard (processing time): both
 * sides' time moves to the broker's clock `now`, as if a record stamped then
 * had come on each queue, and the records whose bound that passes leave (a
 * left join emits its unpaired ones). Safe once no message of either queue
 * stamped before `now − grace` is pending (the flush's guard): a record
 * still to come is stamped at or after that, so nothing it could pair with
 * leaves, and it is late by the same rule as before.
 */
export function expireJoin(opts: ResolvedJoinOptions, stored: ReadonlyMap<string, StateRow>, partition: string, now: number): JoinFold {
  return fold(opts, stored, [], partition, true, now);
}

/** The earliest broker time at which a record the `__join__` row's shard holds may leave on its own (null: it holds none; undefined: unknown, the row predates `due`). */
export function joinExpiresAt(opts: ResolvedJoinOptions, clockValue: unknown): number | null | undefined {
  const due = (clockValue as Partial<JoinClock> | undefined)?.due;
  if (!due) return undefined;
  const soonest = [due.left, due.right].filter((d): d is number => d !== null && d !== undefined);
  return soonest.length === 0 ? null : Math.min(...soonest) + opts.graceMs;
}

function fold(opts: ResolvedJoinOptions, stored: ReadonlyMap<string, StateRow>, inputs: readonly JoinInput[], partition: string, allRows: boolean, now?: number): JoinFold {
  const clockRow = stored.get(JOIN_CLOCK_KEY);
  const storedDue = clockRow?.value?.due as JoinClock['due'] | undefined;
  // A `__join__` row without `due` was written before it was kept; no row at all: the shard holds nothing yet.
  if (!allRows && clockRow && !storedDue) return NEEDS_ALL_ROWS;
  const due: JoinClock['due'] = { left: storedDue?.left ?? null, right: storedDue?.right ?? null };
  const clock: JoinClock = { left: clockRow?.value?.left ?? null, right: clockRow?.value?.right ?? null, partition, due };
  const rows = new Map<string, HeldRecord[]>();
  for (const [key, row] of stored) if (parseRecordsKey(key)) rows.set(key, (row.value?.records ?? []).map((r: HeldRecord) => ({ ...r })));
  const dirty = new Set<string>();
  const outputs: JoinOutput[] = [];
  let late = 0;

  for (const { side, messages } of inputs) {
    for (const m of messages) {
      const time = timeOf(opts, side, m);
      const key = keyOf(opts, side, m);
      const mark = clock[side];
      if (mark !== null && time < mark - opts.graceMs) {
        late += 1;
        continue;
      }
      clock[side] = mark === null ? time : Math.max(mark, time);
      const own: HeldRecord = { offset: m.offset, time, value: m.data };
      const otherKey = joinRecordsKey(other(side), key);
      for (const held of rows.get(otherKey) ?? []) {
        if (Math.abs(held.time - time) > opts.withinMs) continue;
        const [l, r] = side === 'left' ? [own, held] : [held, own];
        if (!l.matched) {
          l.matched = true;
          if (l === held) dirty.add(otherKey);
        }
        outputs.push({ identity: `pair${SEP}${l.offset}${SEP}${r.offset}`, value: select(opts, l.value, r.value, m.offset), key, offset: m.offset });
      }
      const ownKey = joinRecordsKey(side, key);
      const list = rows.get(ownKey) ?? [];
      list.push(own);
      rows.set(ownKey, list);
      dirty.add(ownKey);
      due[side] = due[side] === null ? time + opts.withinMs : Math.min(due[side], time + opts.withinMs);
    }
  }
  if (now !== undefined) {
    clock.left = Math.max(clock.left ?? now, now);
    clock.right = Math.max(clock.right ?? now, now);
  }
  if (!allRows && (expiryDue(opts, due.left, clock.right) || expiryDue(opts, due.right, clock.left))) return NEEDS_ALL_ROWS;

  // Records whose bound the other side's watermark has passed leave. Given
  // only some rows, none does (checked above), and `due` stays as it is.
  const held = { left: 0, right: 0 };
  const kept: JoinClock['due'] = { left: null, right: null };
  for (const [key, list] of rows) {
    const { side, userKey } = parseRecordsKey(key)!;
    const mark = clock[other(side)];
    const keep: HeldRecord[] = [];
    for (const rec of list) {
      if (mark !== null && mark - opts.graceMs > rec.time + opts.withinMs) {
        if (side === 'left' && opts.type === 'left' && !rec.matched) {
          outputs.push({ identity: `left${SEP}${rec.offset}`, value: select(opts, rec.value, null, rec.offset), key: userKey, offset: rec.offset });
        }
      } else {
        keep.push(rec);
        const leaves = rec.time + opts.withinMs;
        kept[side] = kept[side] === null ? leaves : Math.min(kept[side], leaves);
      }
    }
    if (keep.length !== list.length) dirty.add(key);
    rows.set(key, keep);
    held[side] += keep.length;
  }

  if (allRows) clock.due = kept;
  const stateOps: StateOp[] = [];
  for (const key of dirty) {
    const list = rows.get(key)!;
    const version = stored.get(key)?.version ?? 0;
    if (list.length > 0) stateOps.push({ type: 'upsert', key, value: { records: list }, expected_version: version });
    else if (version > 0) stateOps.push({ type: 'delete', key, expected_version: version });
  }
  stateOps.push({ type: 'upsert', key: JOIN_CLOCK_KEY, value: clock, expected_version: clockRow?.version ?? 0 });
  return { stateOps, outputs, late, held, needsAllRows: false, expiresAt: joinExpiresAt(opts, clock) ?? null };
}
