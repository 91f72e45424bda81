import { QueenError, type Queen } from '@queen-mq/client';
import type { RunnerContext, TouchedPartition } from '../context/runner-context.js';
import type { StateOp } from '../context/wire.js';
import { rowsByKey } from '../context/state-api.js';
import { flushRipeRows, nextRipeAt } from './window-batch.js';
import { watermarkAt, watermarkState, watermarkUpsert } from './event-time-idleness.js';
import { reportDeadEmits, windowEmitItems } from './emit-dead-letter.js';
import { commitCycle } from '../commit/commit.js';
import { sleep } from '../context/sleep.js';
import { WATERMARK_KEY, windowKeyPrefix } from '../plan/keys.js';

/**
 * When a partition's open rows can next ripen, as learnt by its last flush.
 * Keyed by the partition's touched entry: every committed cycle replaces that
 * entry, so new data drops the hint and the next tick reads the rows again.
 */
const nextRipeHint = new WeakMap<TouchedPartition, number>();

/** Partitions per page of the queue detail read when seeding. */
const SEED_PAGE = 1000;

/** What one flush pass knows when it reaches a partition. */
interface FlushPass {
  /**
   * The broker's clock, read before the lag: processing time, and event time
   * with idleTimeoutMs (a quiet partition's watermark idles forward on it).
   */
  brokerClockMs?: number;
  /** Partitions the source group had fully consumed, by a lag read started at `lagReadAt`; absent if not read. */
  caughtUp?: ReadonlySet<string>;
  /** performance.now() when that lag read started. */
  lagReadAt?: number;
}

/**
 * One idle flush of one partition (PROTOCOL §7.6): the rows ripe at
 * `clock − grace` (clock = the broker's clock in processing time, read before
 * the source group was seen caught up on this partition; the stored watermark
 * in event time — a flush never advances it, except with idleTimeoutMs on a
 * caught-up partition quiet for longer than that, see event-time-idleness.ts,
 * where the advance is written with the deletes it causes) become one ack:null
 * cycle deleting each row at the version it was read and pushing its emit.
 * A flush that lost a race gets VERSION_CONFLICT, pushes nothing, and the
 * next tick (or the next cycle) closes the window instead. It reads all open
 * rows of the operator (ripeness is decided here, strictly past the end for
 * merging windows) and remembers when the rest ripen, so a quiet partition
 * costs no request per tick until then or until a cycle commits on it.
 *
 * Why a clock may close a window: the cycle carries `flush_before` (the
 * latest end it closes in processing time; the broker time of an idle
 * advance in event time), and the broker commits it only if every message
 * of the partition stamped before that instant is consumed — a push still
 * committing included: it waits for the partition lock the allocator holds
 * from stamping to commit (019_flush_guard.sql). Else the answer is
 * FLUSH_DEFERRED, nothing is written, and the partition counts as deferred:
 * the cycle that reads those messages closes the window, or a later flush.
 * The lag read before the pass only spares the requests of partitions seen
 * with messages pending; the guard is what makes the close safe.
 *
 * Liveness: a partition leaves the flush set only here, when it holds no
 * open window any more — never because it has been quiet for a while, so a
 * window longer than any quiet period (cron day, a long session gap) is
 * still emitted. A batch that ended without a known commit (its cycle's
 * answer was lost) holds the partition back only until the source group is
 * seen caught up on it: then that batch committed after all (or was
 * redelivered and committed), and nothing of it is pending.
 */
async function flushPartition(rt: RunnerContext, partitionId: string, partition: string, pass: FlushPass = {}): Promise<'deferred' | void> {
  const { plan } = rt;
  const { options, tag } = plan.window!;
  let touched = rt.touched.get(partitionId);
  if (touched?.awaitingRedelivery) {
    const settled = pass.caughtUp?.has(partitionId) && pass.lagReadAt !== undefined && (touched.markedAt ?? Infinity) < pass.lagReadAt;
    // A batch of this partition is in a cycle or coming back (not committed): wait for it.
    if (!settled) return 'deferred';
    touched = { partition: touched.partition, lastTouchedMs: touched.lastTouchedMs };
    rt.touched.set(partitionId, touched);
  }
  const forget = () => {
    // Only the entry this flush judged: a cycle since then replaced it and keeps the partition in.
    if (touched && rt.touched.get(partitionId) === touched) rt.touched.delete(partitionId);
  };
  const hint = touched ? nextRipeHint.get(touched) : undefined;
  const idleness = options.eventTime !== undefined && options.idleTimeoutMs !== undefined;
  // Event time: only a cycle moves the watermark (and a cycle drops the hint) — unless it idles forward.
  if (options.eventTime && !idleness && hint !== undefined) return;
  let clock: number | undefined;
  /** Event time with idleness: the `__wm__` upsert persisting the advance this flush closes windows at. */
  let idleAdvance: StateOp[] = [];
  if (options.eventTime) {
    const stored = rowsByKey(await rt.api.stateGet({ query_id: rt.queryId, partition_id: partitionId, keys: [WATERMARK_KEY] }));
    const wm = watermarkState(stored);
    // No watermark: no event was ever folded here, so no window is open.
    if (wm === undefined) return forget();
    clock = wm.eventTimeMs;
    // Idle only when nothing is pending on the partition: a pending message is activity. Lag 0 (read after
    // the clock) spares the request; the broker's guard (flushBefore below) settles it, a push in flight included.
    if (idleness && pass.brokerClockMs !== undefined && pass.caughtUp?.has(partitionId)) {
      const idled = watermarkAt(options, wm, pass.brokerClockMs)!;
      if (idled > clock) {
        clock = idled;
        // Persisted with the deletes it causes (and fenced by the row's version against a racing cycle); the anchor
        // moves to now − idleTimeoutMs so the next advance continues from here instead of counting this one again.
        idleAdvance = watermarkUpsert(options, stored, idled, pass.brokerClockMs - options.idleTimeoutMs!);
      }
    }
  } else {
    clock = pass.brokerClockMs ?? rt.clock.now();
  }
  const ripeAtOrBefore = clock - options.gracePeriodMs;
  // Nothing of this partition can be ripe yet, and no cycle has committed since we looked: no request.
  if (hint !== undefined && hint > ripeAtOrBefore) return;
  // All open rows, not only the ripe ones: the rest tell when to look again
  // (and a merging window's older sessions ripen before the row's windowEnd).
  const rows = await rt.api.stateGet({ query_id: rt.queryId, partition_id: partitionId, key_prefix: windowKeyPrefix(tag) });
  const next = nextRipeAt(plan, rows, ripeAtOrBefore);
  const fold = flushRipeRows(plan, rows, ripeAtOrBefore);
  if (fold.stateOps.length === 0) {
    if (next === Infinity) return forget();
    if (touched) nextRipeHint.set(touched, next);
    return;
  }
  // A post-window operator that throws dead-letters that emit only (emit-dead-letter.ts).
  const { pushItems, dead, byTransactionId } = await windowEmitItems(rt, partitionId, partition, fold.emits);
  // The guard covers the whole close horizon this flush writes (ripeAtOrBefore, close-horizon.ts), not only the
  // ends of the windows it closes: a pending message stamped before it would otherwise be judged late on arrival.
  // Event time without an idle advance needs no guard: a pending event for a window the stored watermark closed is late by the same rule in its cycle.
  const flushBefore = options.eventTime ? (idleAdvance.length ? pass.brokerClockMs : undefined) : Math.floor(ripeAtOrBefore);
  // A flush that lost a race (VERSION_CONFLICT) or was deferred pushed nothing: the next tick or cycle closes the window.
  const result = await commitCycle(rt, {
    partitionId,
    partition,
    stateOps: idleAdvance.length ? [...fold.stateOps, ...idleAdvance] : fold.stateOps,
    pushItems,
    ack: null,
    ...(flushBefore !== undefined ? { flushBefore } : {}),
    messages: 0,
    emits: fold.emits.length,
    windowEmits: byTransactionId,
    onCommitted() {
      reportDeadEmits(rt, dead);
      if (next === Infinity) forget();
      else if (touched) nextRipeHint.set(touched, next);
    },
  });
  if (result === 'deferred') return 'deferred';
}

/**
 * A runner that starts after a restart has touched nothing yet, but open
 * windows of its previous life may be waiting on quiet partitions, however
 * long ago they were last written: seed the flush set with every partition
 * of the source (only the pinned one for a partition source). The first pass
 * reads each one's rows and drops those with no open window, so what stays is
 * exactly the partitions the state rows name.
 */
export async function seedTouchedFromSource(rt: RunnerContext, queen: Queen): Promise<void> {
  const now = rt.clock.local();
  // The queue detail lists its partitions a page at a time (PROTOCOL §5.10): read every page.
  for (let offset = 0; ; ) {
    let detail: { partitions?: { id: string; name: string }[]; partitionCount?: number };
    try {
      detail = (await queen.api.queueGet({ params: { queue: rt.plan.sourceQueue }, query: { limit: SEED_PAGE, offset } })) as typeof detail;
    } catch (err) {
      if (err instanceof QueenError && err.code === 'QUEUE_NOT_FOUND') return;
      throw err;
    }
    const page = detail.partitions ?? [];
    for (const p of page) {
      // A pinned source never touches the queue's other partitions.
      if (rt.plan.sourcePartition !== null && p.name !== rt.plan.sourcePartition) continue;
      if (!rt.touched.has(p.id)) rt.touched.set(p.id, { partition: p.name, lastTouchedMs: now });
    }
    offset += page.length;
    if (page.length < SEED_PAGE || (detail.partitionCount !== undefined && offset >= detail.partitionCount)) return;
  }
}

/**
 * Which partitions the source group has fully consumed (lag 0), asked of the
 * broker. A partition with a message pending (not popped yet, or leased by
 * a runner that died mid-cycle) is skipped without a request in processing
 * time, and not idled forward in event time: the broker's guard would defer
 * that flush anyway. Lag 0 is no proof (a push stamped earlier may still be
 * committing); the guard in the flush's cycle is.
 */
async function caughtUpPartitions(rt: RunnerContext, queen: Queen): Promise<Set<string>> {
  let detail: { partitions?: { partitionId: string; lag: number }[] };
  try {
    detail = (await queen.api.groupGet({ params: { group: rt.consumerGroup }, query: { queue: rt.plan.sourceQueue } })) as typeof detail;
  } catch (err) {
    if (err instanceof QueenError && err.code === 'CONSUMER_GROUP_NOT_FOUND') return new Set();
    throw err;
  }
  return new Set((detail.partitions ?? []).filter((p) => Number(p.lag) === 0).map((p) => p.partitionId));
}

/** Partitions flushed at once in one pass: each is a state read (+ a cycle); they queue on PostgreSQL, not on the CPU. */
const FLUSH_CONCURRENCY = 16;

/**
 * One pass over the flush set, each partition under its partition lock,
 * FLUSH_CONCURRENCY at a time (a sequential pass over many quiet partitions
 * would delay the last one's close by the whole pass). Answers how many
 * partitions it had to defer because a batch of theirs was not committed
 * yet (not caught up, or in a cycle).
 */
export async function flushTouchedPartitions(rt: RunnerContext, queen: Queen): Promise<number> {
  if (rt.touched.size === 0) return 0;
  const { options } = rt.plan.window!;
  const processingTime = !options.eventTime;
  const idleness = !processingTime && options.idleTimeoutMs !== undefined;
  const pass: FlushPass = {};
  if (processingTime || idleness) {
    // The clock is read before the lag: everything committed before it is consumed on a caught-up partition.
    try {
      pass.brokerClockMs = await rt.clock.nowAfterSync(queen);
    } catch (err) {
      rt.report(err, { phase: 'flush' });
      return 0;
    }
  }
  // Event time needs the lag to release partitions held by an unknown commit, and with idleness to see which are quiet.
  if (processingTime || idleness || [...rt.touched.values()].some((t) => t.awaitingRedelivery)) {
    pass.lagReadAt = performance.now();
    try {
      pass.caughtUp = await caughtUpPartitions(rt, queen);
    } catch (err) {
      rt.report(err, { phase: 'flush' });
      return 0;
    }
  }
  let deferred = 0;
  const due: [string, TouchedPartition][] = [];
  for (const [partitionId, info] of [...rt.touched]) {
    if (processingTime && !pass.caughtUp!.has(partitionId)) {
      deferred += 1;
      continue;
    }
    due.push([partitionId, info]);
  }
  let next = 0;
  const worker = async () => {
    while (next < due.length && !rt.isStopped()) {
      const [partitionId, info] = due[next++]!;
      try {
        const outcome = await rt.locks.run(partitionId, () => flushPartition(rt, partitionId, info.partition, pass));
        if (outcome === 'deferred') deferred += 1;
      } catch (err) {
        rt.report(err, { phase: 'flush', partitionId });
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(FLUSH_CONCURRENCY, due.length) }, worker));
  return deferred;
}

/** Delay of the one follow-up flush pass after a tick that had to defer partitions mid-cycle. */
const FLUSH_RETRY_MS = 200;

/**
 * The idle-flush timer of a window query with idleFlushMs > 0: seeds the
 * flush set from the source, then runs a pass every idleFlushMs until
 * `signal` aborts. Fixed-rate ticks: a pass's own duration does not push the
 * next tick back (a window ending just after a tick still waits at most one
 * interval).
 */
export async function flushLoop(rt: RunnerContext, queen: Queen, signal: AbortSignal): Promise<void> {
  const every = rt.plan.window?.options.idleFlushMs ?? 0;
  if (rt.plan.shape !== 'window' || every <= 0) return;
  try {
    await seedTouchedFromSource(rt, queen);
  } catch (err) {
    rt.report(err, { phase: 'flush' });
  }
  let tick = Date.now();
  while (!signal.aborted) {
    tick += every;
    const wait = tick - Date.now();
    if (wait > 0) await sleep(wait, signal);
    else tick = Date.now(); // a pass overran a whole interval: do not burst to catch up
    if (signal.aborted) return;
    const deferred = await flushTouchedPartitions(rt, queen);
    // A partition whose last batch was still committing at the tick would
    // otherwise wait a whole interval more: look once more shortly after.
    const retryIn = Math.min(FLUSH_RETRY_MS, every / 4);
    if (deferred > 0 && tick + every - Date.now() > retryIn * 2) {
      await sleep(retryIn, signal);
      if (signal.aborted) return;
      await flushTouchedPartitions(rt, queen);
    }
  }
}
