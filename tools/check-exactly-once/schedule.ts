// A seed's schedule: the pushes (payloads, partitions, timing) and the faults,
// drawn from the seed's PRNG for one variant.
//
// Processing time: steps carry `atMs`, wall-clock offsets from a whole second
// (the run aligns its start to one), clustered around window boundaries: a
// small push some 100s of ms before a boundary opens the window, a large push
// lands a few ms before it (its items are stamped before the boundary but may
// commit after it: the idle flush's race), a small one right after it.
//
// Event time: steps run in order. The watermark depends on how the runner cuts
// batches, so the schedule keeps the expected result independent of batching:
//   - an on-time event has `ts + grace > prefixMax − allowedLateness`, where
//     prefixMax is the greatest event time pushed before it on its partition:
//     whatever batch it lands in, the watermark before that batch is at most
//     prefixMax − allowedLateness, so every window it belongs to (its end is
//     after ts; a session it touches ends at or after ts) is still open. Such
//     events arrive out of order by up to allowedLateness + grace;
//   - a deliberately late event is pushed only after the run has SEEN the
//     partition's watermark reach `wmSeen` (the __wm__ state row), and every
//     window of it has `end + grace <= wmSeen` (a session: `ts + gap + grace <
//     wmSeen`, on a key of its own so it can join no open session). The
//     watermark never moves back, so it is late in any batch;
//   - a closer far ahead in event time on every partition closes every
//     window but its own at the end.
// The model (model.ts) does not trust these rules: it classifies each stored
// event from its stored neighbours and `wmSeen`, and reports an event that is
// neither provably on time nor provably late as a schedule error.
import type { Rng } from './prng.js';
import { SESSION_GAP_S, TUMBLING_S, type Fault, type Variant } from './variant.js';

export interface Item {
  /** State key (keyBy). */
  k: string;
  /** Summed by the windows. */
  n: number;
  /** Event time (epoch ms); absent on a message whose event time is unusable. */
  ts?: number;
  /** A deliberately late event: the watermark the run saw before pushing it. */
  wmSeen?: number;
  /** Join: the record's own id (unique per pushed item; a push retried after a broker restart may store it twice). */
  id?: string;
}

export type Step =
  | { type: 'push'; partition: string; items: Item[]; atMs?: number; leadFactor?: number; /** Join: the right queue (default: the source, the left one). */ queue?: 'right' }
  | { type: 'await-watermark'; partition: string; atLeast: number; atMs?: undefined }
  | { type: 'fault'; fault: Fault; atMs?: number };

export interface Schedule {
  partitions: string[];
  steps: Step[];
  /** Processing time: when the last push is due (ms after the start). */
  durationMs: number;
}

const KEYS = ['a', 'b', 'c'];
export const CLOSER_KEY = 'closer';
export const LATE_SESSION_KEY = 'late';
const CLOSER_AHEAD_MS = 3_600_000;

export function drawSchedule(rng: Rng, v: Variant, seed: number): Schedule {
  const partitions = Array.from({ length: rng.int(1, 3) }, (_, i) => `p${i}`);
  if (v.kind === 'gate') return gateSchedule(rng, v, partitions);
  if (v.kind === 'join') return joinSchedule(rng, v, partitions);
  return v.time === 'processing' ? processingSchedule(rng, v, partitions) : eventSchedule(rng, v, partitions, seed);
}

const item = (rng: Rng, extra: Partial<Item> = {}): Item => ({ k: rng.pick(KEYS), n: rng.int(1, 100), ...extra });
const items = (rng: Rng, count: number) => Array.from({ length: count }, () => item(rng));

function faultsAt(rng: Rng, v: Variant, durationMs: number): Step[] {
  const out: Step[] = [];
  for (const fault of v.faults) {
    const times = fault === 'restart' ? 1 : rng.int(1, 3);
    for (let i = 0; i < times; i++) out.push({ type: 'fault', fault, atMs: rng.int(200, Math.max(300, durationMs)) });
  }
  return out;
}

function processingSchedule(rng: Rng, v: Variant, partitions: string[]): Schedule {
  const durationMs = rng.int(2200, 3800);
  const steps: Step[] = [];
  const gapMs = SESSION_GAP_S * 1000;
  // Around boundaries (whole seconds: every window kind here has its boundaries there), on one
  // partition at a time, the shape: a small push opens the window and is consumed, the
  // partition stays quiet (so the idle flush finds it caught up), then a large push is sent so that
  // it is stamped just before the boundary and committed after it. The broker reads and validates
  // the body before it stamps (~25 ms for 500 items, ~120 ms for 2,000 on an idle 2-core machine,
  // then 50 to 300 ms from stamp to commit; the idle flush closed a quiet window ~250 ms after its
  // end in a debug run, so only thousands of items straddle it), so the run sends it earlier by that lead, measured on
  // the machine (run.ts), times `leadFactor`.
  const quiet: { partition: string; from: number; to: number }[] = [];
  for (let boundary = 1000; boundary <= durationMs; boundary += 1000) {
    if (!rng.chance(0.6)) continue;
    const partition = rng.pick(partitions);
    const opener = boundary - rng.int(250, 600);
    steps.push({ type: 'push', partition, items: items(rng, 1), atMs: opener });
    steps.push({ type: 'push', partition, items: items(rng, rng.int(2000, 5000)), atMs: boundary, leadFactor: 0.8 + rng.next() * 0.7 });
    if (rng.chance(0.2)) steps.push({ type: 'push', partition, items: items(rng, rng.int(1, 5)), atMs: boundary + rng.int(0, 3) });
    quiet.push({ partition, from: opener - 50, to: boundary + 300 });
  }
  // background: small pushes, spaced so sessions both join and split (gaps around the session gap)
  for (const partition of partitions) {
    for (let at = rng.int(0, 200); at < durationMs; ) {
      if (!quiet.some((q) => q.partition === partition && at >= q.from && at <= q.to)) steps.push({ type: 'push', partition, items: items(rng, rng.int(1, 8)), atMs: at });
      at += v.kind === 'session' ? rng.pick([20, 80, gapMs - 25, gapMs + 25, gapMs + 150]) : rng.int(30, 450);
    }
  }
  steps.push(...faultsAt(rng, v, durationMs));
  steps.sort((a, b) => (a.atMs ?? 0) - (b.atMs ?? 0));
  return { partitions, steps, durationMs };
}

/** How far before its end a late event must lie so that every window of it has ended (ms). */
function longestWindowMs(v: Variant): number {
  switch (v.kind) {
    case 'sliding':
      return v.sliding!.sizeMs;
    case 'cron-expr':
      return 6000; // fire gaps are at most 3 s, 5 s across the minute
    case 'session':
      return SESSION_GAP_S * 1000 + 1;
    default:
      return TUMBLING_S * 1000;
  }
}

function eventSchedule(rng: Rng, v: Variant, partitions: string[], seed: number): Schedule {
  const graceMs = v.graceS * 1000;
  const latenessMs = v.allowedLatenessS * 1000;
  const t0 = Date.parse('2026-01-05T10:00:00.000Z') + (seed % 10_000) * 60_000;
  const perPartition: Step[][] = [];
  let globalMax = t0;
  for (const partition of partitions) {
    const steps: Step[] = [];
    let prefixMax = -Infinity;
    let cursor = t0 + rng.int(0, 999);
    let pending: Item[] = [];
    const flush = () => {
      if (pending.length) steps.push({ type: 'push', partition, items: pending });
      pending = [];
    };
    const events = rng.int(15, 90);
    for (let i = 0; i < events; i++) {
      const roll = rng.next();
      if (v.badEventTime && roll < 0.04) {
        pending.push(item(rng)); // no ts: unusable event time
      } else if (roll < 0.12 && i > 5 && Number.isFinite(prefixMax)) {
        // deliberately late: wait until the partition's watermark is seen at prefixMax − lateness
        flush();
        const target = prefixMax - latenessMs;
        steps.push({ type: 'await-watermark', partition, atLeast: target });
        const ts = target - graceMs - longestWindowMs(v) - rng.int(0, 1500);
        steps.push({ type: 'push', partition, items: [item(rng, { ts, wmSeen: target, ...(v.kind === 'session' ? { k: LATE_SESSION_KEY } : {}) })] });
      } else if (roll < 0.35 && Number.isFinite(prefixMax)) {
        // out of order, but within lateness + grace of the newest event: on time in any batch
        const slack = latenessMs + graceMs;
        const ts = prefixMax - Math.floor(rng.next() * Math.max(0, slack - 5));
        pending.push(item(rng, { ts }));
      } else {
        cursor += v.kind === 'session' ? rng.pick([10, 60, SESSION_GAP_S * 1000 - 20, SESSION_GAP_S * 1000 + 40, 700]) : rng.int(0, 180);
        pending.push(item(rng, { ts: cursor }));
        prefixMax = Math.max(prefixMax, cursor);
      }
      if (rng.chance(0.15)) flush();
    }
    flush();
    globalMax = Math.max(globalMax, prefixMax);
    perPartition.push(steps);
  }
  // interleave the partitions' steps (each keeps its order), with the faults between them
  const steps: Step[] = [];
  const cursors = perPartition.map(() => 0);
  for (;;) {
    const open = perPartition.map((s, i) => i).filter((i) => cursors[i]! < perPartition[i]!.length);
    if (!open.length) break;
    const i = rng.pick(open);
    steps.push(perPartition[i]![cursors[i]!++]!);
  }
  for (const f of faultsAt(rng, v, 0)) steps.splice(rng.int(0, steps.length), 0, { type: 'fault', fault: f.type === 'fault' ? f.fault : 'kill' });
  for (const partition of partitions) steps.push({ type: 'push', partition, items: [{ k: CLOSER_KEY, n: 0, ts: globalMax + CLOSER_AHEAD_MS }] });
  return { partitions, steps, durationMs: 0 };
}

function gateSchedule(rng: Rng, v: Variant, partitions: string[]): Schedule {
  const steps: Step[] = [];
  let durationMs = 0;
  for (const partition of partitions) {
    let at = rng.int(0, 100);
    for (let left = rng.int(0, 40); left > 0; ) {
      const count = Math.min(left, rng.int(1, 10));
      steps.push({ type: 'push', partition, items: items(rng, count), atMs: at });
      left -= count;
      at += rng.int(0, 300);
    }
    durationMs = Math.max(durationMs, at);
  }
  steps.push(...faultsAt(rng, v, durationMs));
  steps.sort((a, b) => (a.atMs ?? 0) - (b.atMs ?? 0));
  return { partitions, steps, durationMs };
}

/**
 * A join's schedule: records of both queues on every partition, keys a/b/c,
 * in small pushes. Event time: times mostly rising with jumps back (some
 * beyond the grace: late), in steps run in order; processing time: pushes at
 * wall-clock offsets, several in flight at once, with quiet gaps longer
 * than a bound now and then. Either way the pairs do not depend on how the
 * runner cuts or orders batches (each side's lateness is judged in its own
 * offset order), so the model needs only what was stored. In event time the
 * schedule ends with a closer on each side of each partition, far enough
 * ahead that every other record's bound has passed; in processing time the
 * broker's clock passes them (the run waits for it).
 */
function joinSchedule(rng: Rng, v: Variant, partitions: string[]): Schedule {
  const within = v.withinMs!;
  const steps: Step[] = [];
  let n = 0;
  const record = (ts?: number): Item => ({ k: rng.pick(KEYS), n: 0, id: `r${++n}`, ...(ts !== undefined ? { ts } : {}) });
  if (v.time === 'event') {
    const t0 = Date.parse('2026-01-05T10:00:00.000Z');
    let max = t0;
    const clocks = new Map<string, number>();
    for (let i = rng.int(20, 70); i > 0; i--) {
      const partition = rng.pick(partitions);
      const queue = rng.chance(0.5) ? ('right' as const) : undefined;
      const side = `${partition}/${queue ?? 'left'}`;
      const items: Item[] = [];
      for (let j = rng.int(1, 4); j > 0; j--) {
        let t = (clocks.get(side) ?? t0) + rng.int(0, 400);
        clocks.set(side, t);
        if (rng.chance(0.25)) t -= rng.int(0, v.graceS * 1000 + within + 500); // back in time: within the grace, or late
        max = Math.max(max, t);
        items.push(record(t));
      }
      steps.push({ type: 'push', partition, items, ...(queue ? { queue } : {}) });
    }
    for (const f of faultsAt(rng, v, 0)) steps.splice(rng.int(0, steps.length), 0, { type: 'fault', fault: f.type === 'fault' ? f.fault : 'kill' });
    for (const partition of partitions) {
      steps.push({ type: 'push', partition, queue: 'right', items: [{ k: CLOSER_KEY, n: 0, id: `closer-r-${partition}`, ts: max + CLOSER_AHEAD_MS }] });
      steps.push({ type: 'push', partition, items: [{ k: CLOSER_KEY, n: 0, id: `closer-l-${partition}`, ts: max + CLOSER_AHEAD_MS }] });
    }
    return { partitions, steps, durationMs: 0 };
  }
  // Processing time: no closers. The broker's clock passes every bound once
  // the queues are quiet, and the join's idle flush lets the records go;
  // quiet gaps longer than a bound on the way make it do so mid-run too,
  // beside the cycles of the other partitions.
  const busyMs = rng.int(1500, 3000);
  let at = 0;
  for (let busy = 0; busy < busyMs; ) {
    const partition = rng.pick(partitions);
    steps.push({ type: 'push', partition, items: Array.from({ length: rng.int(1, 4) }, () => record()), atMs: at, ...(rng.chance(0.5) ? { queue: 'right' as const } : {}) });
    const step = rng.int(10, 150);
    busy += step;
    at += step + (rng.chance(0.05) ? within + v.graceS * 1000 + rng.int(100, 600) : 0);
  }
  steps.push(...faultsAt(rng, v, at));
  steps.sort((a, b) => (a.atMs ?? 0) - (b.atMs ?? 0));
  return { partitions, steps, durationMs: at };
}
