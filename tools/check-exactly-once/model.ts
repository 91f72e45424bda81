// The reference model: from the STORED source messages (read back from the
// broker after the run) it answers what the sink, the late queue, the DLQ
// and the state must hold. Written from the specification (the window
// options table and the window plugins' READMEs), small and obvious, and it
// imports nothing from packages/core or packages/windows on purpose: a bug
// there must not be copied into the expectation.
//
// Rules it encodes:
//   tumbling   [floor(t/S)·S, +S), epoch aligned, end exclusive
//   sliding    [k·slide, k·slide + size) for every integer k with t inside
//              (any slide up to size: a multiple or not)
//   cron unit  'second': like tumbling with S = 1 s (UTC has no leap seconds in epoch time)
//   cron expr  fire times split the line into [fire_i, fire_i+1); here a
//              seconds list with every other field '*': fires at those
//              seconds of every minute, in any zone whose UTC offset is a
//              whole number of minutes (all the zones the variants draw)
//   session    per (partition, key), events whose [t, t+gap] intervals touch
//              (inclusive) form one session [first, last + gap]
//   processing time: windows bucket on createdAt; every window closes (the
//              run waits until the broker's clock is past every end + grace)
//   event time: watermark = max event time − allowedLateness, per partition,
//              from the batches before. Grace admits: an event is folded in
//              while its window's end + grace is after the watermark (a
//              session: not strictly past); otherwise it is late — one late
//              record per missed window (dropped / emitted apart / to the
//              late sink). A window is emitted once end + grace ≤ the
//              final watermark (a session: strictly past it).
//   a message whose event time is unusable goes to the DLQ.
//   gate: per partition, the first min(budget, n) messages in order are
//              allowed (the budget never refills; a denied message comes
//              back by lease and is denied again), numbered 1..k.
import type { Variant } from './variant.js';

export interface StoredMessage {
  partition: string;
  offset: string;
  createdAtMs: number;
  data: { k: string; n: number; ts?: number; wmSeen?: number };
}

export interface ExpectedWindow {
  partition: string;
  key: string;
  start: number;
  end: number;
  count: number;
  sum: number;
  /** Still open at the end of the run (its end + grace is not behind the final watermark): in state, not on the sink. */
  open: boolean;
  /**
   * For reading a discrepancy, not for the verdict: event time, how many of its events the watermark may
   * already have passed the end of (admitted by grace alone); processing time, the largest number of its
   * items stamped at one instant (one push).
   */
  graceAdmitted?: number;
  largestPush?: number;
}

export interface ExpectedLate {
  partition: string;
  offset: string;
  key: string;
  start: number;
  end: number;
  n: number;
}

export interface ModelResult {
  windows: ExpectedWindow[];
  late: ExpectedLate[];
  /** Source messages that belong in the query's DLQ. */
  deadLetters: { partition: string; offset: string }[];
  /** Gate: per partition, the messages allowed, in order (seq = index + 1). */
  gate?: Map<string, { offset: string; n: number }[]>;
  /** Events the schedule should never produce: neither provably on time nor provably late. */
  ambiguous: string[];
}

interface Span {
  start: number;
  end: number;
}

const byOffset = (a: StoredMessage, b: StoredMessage) => (BigInt(a.offset) < BigInt(b.offset) ? -1 : BigInt(a.offset) > BigInt(b.offset) ? 1 : 0);

/** The fixed windows a timestamp falls in. */
export function fixedWindowsOf(v: Variant, t: number): Span[] {
  switch (v.kind) {
    case 'tumbling':
    case 'cron-unit': {
      const start = Math.floor(t / 1000) * 1000;
      return [{ start, end: start + 1000 }];
    }
    case 'sliding': {
      const size = v.sliding!.sizeMs;
      const slide = v.sliding!.slideMs;
      const out: Span[] = [];
      for (let k = Math.floor(t / slide); k * slide + size > t; k--) out.push({ start: k * slide, end: k * slide + size });
      return out.reverse();
    }
    case 'cron-expr':
      return [cronBucket(v.cronSeconds!, t)];
    default:
      throw new Error(`not a fixed window: ${v.kind}`);
  }
}

/** [last fire ≤ t, next fire) for fires at `seconds` of every minute. */
export function cronBucket(seconds: number[], t: number): Span {
  const fires = [...seconds].sort((a, b) => a - b);
  const minute = Math.floor(t / 60_000) * 60_000;
  const candidates = [...fires.map((s) => minute - 60_000 + s * 1000), ...fires.map((s) => minute + s * 1000), ...fires.map((s) => minute + 60_000 + s * 1000)];
  let start = -Infinity;
  let end = Infinity;
  for (const c of candidates) {
    if (c <= t && c > start) start = c;
    if (c > t && c < end) end = c;
  }
  return { start, end };
}

export function referenceModel(v: Variant, messages: StoredMessage[]): ModelResult {
  const sorted = [...messages].sort((a, b) => a.partition.localeCompare(b.partition) || byOffset(a, b));
  if (v.kind === 'gate') return gateModel(v, sorted);
  const result: ModelResult = { windows: [], late: [], deadLetters: [], ambiguous: [] };
  const byPartition = new Map<string, StoredMessage[]>();
  for (const m of sorted) byPartition.set(m.partition, [...(byPartition.get(m.partition) ?? []), m]);
  for (const [partition, list] of byPartition) modelPartition(v, partition, list, result);
  return result;
}

function usableTs(m: StoredMessage): number | undefined {
  const ts = m.data.ts;
  return typeof ts === 'number' && Number.isFinite(ts) ? ts : undefined;
}

function modelPartition(v: Variant, partition: string, list: StoredMessage[], out: ModelResult) {
  const graceMs = v.graceS * 1000;
  const latenessMs = v.allowedLatenessS * 1000;
  const eventTime = v.time === 'event';
  // the events that are folded into windows, with their time
  const folded: { m: StoredMessage; t: number; windows?: (Span & { byGrace?: boolean })[] }[] = [];
  let prefixMax = -Infinity;
  const finalWm = eventTime ? Math.max(...list.map((m) => usableTs(m) ?? -Infinity)) - latenessMs : Infinity;

  for (const m of list) {
    if (!eventTime) {
      folded.push({ m, t: m.createdAtMs });
      continue;
    }
    const t = usableTs(m);
    if (t === undefined) {
      out.deadLetters.push({ partition, offset: m.offset });
      continue;
    }
    const wmHi = prefixMax - latenessMs; // the watermark before its batch is at most this
    const wmLo = m.data.wmSeen ?? -Infinity; // and at least this (seen before it was pushed)
    prefixMax = Math.max(prefixMax, t);
    if (v.kind === 'session') {
      folded.push({ m, t }); // classified below, once every on-time neighbour is known
      continue;
    }
    const onTime: (Span & { byGrace?: boolean })[] = [];
    for (const w of fixedWindowsOf(v, t)) {
      if (w.end + graceMs > wmHi) onTime.push({ ...w, byGrace: w.end <= wmHi });
      else if (w.end + graceMs <= wmLo) out.late.push({ partition, offset: m.offset, key: m.data.k, start: w.start, end: w.end, n: m.data.n });
      else out.ambiguous.push(`${partition}@${m.offset} ts=${t} window [${w.start}, ${w.end}) against watermark in [${wmLo}, ${wmHi}]`);
    }
    folded.push({ m, t, windows: onTime });
  }

  if (v.kind === 'session') {
    sessionsOf(v, partition, folded, finalWm, out, list, latenessMs);
    return;
  }
  const windows = new Map<string, ExpectedWindow>();
  const pushes = new Map<string, Map<number, number>>();
  for (const f of folded) {
    for (const w of f.windows ?? fixedWindowsOf(v, f.t)) {
      const id = `${f.m.data.k}|${w.start}`;
      const e = windows.get(id) ?? { partition, key: f.m.data.k, start: w.start, end: w.end, count: 0, sum: 0, open: eventTime && !(w.end + graceMs <= finalWm) };
      e.count += 1;
      e.sum += f.m.data.n;
      if ('byGrace' in w && w.byGrace) e.graceAdmitted = (e.graceAdmitted ?? 0) + 1;
      if (!eventTime) {
        const stamps = pushes.get(id) ?? new Map<number, number>();
        stamps.set(f.m.createdAtMs, (stamps.get(f.m.createdAtMs) ?? 0) + 1);
        pushes.set(id, stamps);
      }
      windows.set(id, e);
    }
  }
  for (const [id, stamps] of pushes) windows.get(id)!.largestPush = Math.max(...stamps.values());
  out.windows.push(...windows.values());
}

function sessionsOf(v: Variant, partition: string, folded: { m: StoredMessage; t: number }[], finalWm: number, out: ModelResult, list: StoredMessage[], latenessMs: number) {
  const gapMs = 300;
  const graceMs = v.graceS * 1000;
  const eventTime = v.time === 'event';
  // event time: split into on time and late first (prefix maxima in offset order)
  const onTime: { m: StoredMessage; t: number }[] = [];
  const lateCandidates: { m: StoredMessage; t: number }[] = [];
  if (eventTime) {
    let prefixMax = -Infinity;
    const prefixOf = new Map<string, number>();
    for (const m of list) {
      prefixOf.set(m.offset, prefixMax);
      const t = usableTs(m);
      if (t !== undefined) prefixMax = Math.max(prefixMax, t);
    }
    for (const f of folded) {
      const wmHi = prefixOf.get(f.m.offset)! - latenessMs;
      if (f.t + graceMs >= wmHi) onTime.push(f);
      else lateCandidates.push(f);
    }
    for (const f of lateCandidates) {
      const wmLo = f.m.data.wmSeen ?? -Infinity;
      const touches = onTime.some((o) => o.m.data.k === f.m.data.k && Math.abs(o.t - f.t) <= gapMs);
      if (!touches && f.t + gapMs + graceMs < wmLo) out.late.push({ partition, offset: f.m.offset, key: f.m.data.k, start: f.t, end: f.t + gapMs, n: f.m.data.n });
      else out.ambiguous.push(`${partition}@${f.m.offset} session event ts=${f.t} key=${f.m.data.k}: not provably late (watermark seen ${wmLo}${touches ? ', touches an on-time event' : ''})`);
    }
  } else onTime.push(...folded);

  const byKey = new Map<string, { m: StoredMessage; t: number }[]>();
  for (const f of onTime) byKey.set(f.m.data.k, [...(byKey.get(f.m.data.k) ?? []), f]);
  for (const [key, events] of byKey) {
    events.sort((a, b) => a.t - b.t);
    let cur: ExpectedWindow | undefined;
    for (const e of events) {
      if (cur && e.t <= cur.end) {
        cur.end = Math.max(cur.end, e.t + gapMs);
      } else {
        if (cur) out.windows.push(cur);
        cur = { partition, key, start: e.t, end: e.t + gapMs, count: 0, sum: 0, open: false };
      }
      cur.count += 1;
      cur.sum += e.m.data.n;
    }
    if (cur) out.windows.push(cur);
  }
  if (eventTime) for (const w of out.windows) if (w.partition === partition) w.open = !(finalWm > w.end + graceMs);
}

function gateModel(v: Variant, sorted: StoredMessage[]): ModelResult {
  const gate = new Map<string, { offset: string; n: number }[]>();
  for (const m of sorted) {
    const allowed = gate.get(m.partition) ?? [];
    if (allowed.length < v.budget!) allowed.push({ offset: m.offset, n: m.data.n });
    gate.set(m.partition, allowed);
  }
  return { windows: [], late: [], deadLetters: [], ambiguous: [], gate };
}
