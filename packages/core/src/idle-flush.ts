import { QueenError, type Queen } from '@queen-mq/client';
import type { RunnerContext } from './runner-context.js';
import { rowsByKey } from './state-api.js';
import { storedWatermark, flushRipeRows } from './window-batch.js';
import { cycleFailure, emitOutputs } from './cycle.js';
import { sinkOutputs } from './sink-output.js';
import { WATERMARK_KEY, windowKeyPrefix } from './keys.js';

/** Partitions quiet for longer than this are no longer flushed by this runner. */
export const TOUCHED_WINDOW_MS = 5 * 60 * 1000;

/**
 * One idle flush of one partition (PROTOCOL §7.6): the rows ripe at
 * `clock − grace` (clock = the wall clock in processing time, read before the
 * source group was seen caught up on this partition; the stored watermark in
 * event time — a flush never advances it) become one ack:null
 * cycle deleting each row at the version it was read and pushing its emit.
 * A flush that lost a race gets VERSION_CONFLICT, pushes nothing, and the
 * next tick (or the next cycle) closes the window instead.
 */
export async function flushPartition(rt: RunnerContext, partitionId: string, partition: string, processingClockMs?: number): Promise<void> {
  const { plan } = rt;
  const { plugin, options } = plan.window!;
  // A batch of this partition is coming back (its cycle did not commit): wait for it.
  if (rt.touched.get(partitionId)?.awaitingRedelivery) return;
  let clock: number | undefined;
  if (options.eventTime) {
    clock = storedWatermark(rowsByKey(await rt.api.stateGet({ query_id: rt.queryId, partition_id: partitionId, keys: [WATERMARK_KEY] })));
    if (clock === undefined) return;
  } else {
    clock = processingClockMs ?? Date.now();
  }
  const ripeAtOrBefore = clock - options.gracePeriodMs;
  const rows = await rt.api.stateGet({ query_id: rt.queryId, partition_id: partitionId, key_prefix: windowKeyPrefix(plugin.tag), ripe_at_or_before: ripeAtOrBefore });
  if (rows.length === 0) return;
  const fold = flushRipeRows(plan, rows, ripeAtOrBefore);
  if (fold.stateOps.length === 0) return;
  const outputs = emitOutputs(rt, partitionId, partition, fold.emits);
  const pushItems = await sinkOutputs(plan, rt.queryId, partitionId, outputs);
  const res = await rt.api.cycle({
    query_id: rt.queryId,
    partition_id: partitionId,
    consumer_group: rt.consumerGroup,
    state_ops: fold.stateOps,
    push_items: pushItems,
    ack: null,
  });
  if (res.success) {
    rt.metrics.flushCyclesTotal += 1;
    rt.events.emit('window:flush', { partitionId, partition, stateOps: fold.stateOps.length, pushes: pushItems.length, emits: fold.emits.length });
  } else if (res.code !== 'VERSION_CONFLICT') {
    throw cycleFailure(res);
  }
}

/**
 * A runner that starts after a restart has touched nothing yet, but open
 * windows of its previous life may be waiting on quiet partitions: seed the
 * flush set with the source partitions active in the last five minutes.
 */
export async function seedTouchedFromSource(rt: RunnerContext, queen: Queen): Promise<void> {
  let detail: { partitions?: { id: string; name: string; lastActivity?: string | null }[] };
  try {
    detail = await queen.request('GET', `/api/v1/resources/queues/${encodeURIComponent(rt.plan.sourceQueue)}`, { idempotent: true });
  } catch (err) {
    if (err instanceof QueenError && err.code === 'QUEUE_NOT_FOUND') return;
    throw err;
  }
  const since = Date.now() - TOUCHED_WINDOW_MS;
  for (const p of detail.partitions ?? []) {
    const last = p.lastActivity ? Date.parse(p.lastActivity) : NaN;
    if (last >= since && !rt.touched.has(p.id)) rt.touched.set(p.id, { partition: p.name, lastTouchedMs: last });
  }
}

/**
 * Processing time: which partitions the source group has fully consumed
 * (lag 0), asked of the broker. A window may be closed by the wall clock only
 * on those: a pending message (not popped yet, or leased by a runner that
 * died mid-cycle) could still belong to it, and re-creating an emitted
 * window would collide with its deterministic sink transactionId.
 */
async function caughtUpPartitions(rt: RunnerContext, queen: Queen): Promise<Set<string>> {
  let detail: { partitions?: { partitionId: string; lag: number }[] };
  try {
    detail = await queen.request('GET', `/api/v1/consumer-groups/${encodeURIComponent(rt.consumerGroup)}`, {
      query: { queue: rt.plan.sourceQueue },
      idempotent: true,
    });
  } catch (err) {
    if (err instanceof QueenError && err.code === 'CONSUMER_GROUP_NOT_FOUND') return new Set();
    throw err;
  }
  return new Set((detail.partitions ?? []).filter((p) => Number(p.lag) === 0).map((p) => p.partitionId));
}

/** One pass over the partitions touched in the last five minutes, each under its partition lock. */
export async function flushTouchedPartitions(rt: RunnerContext, queen: Queen): Promise<void> {
  if (rt.touched.size === 0) return;
  const processingTime = !rt.plan.window!.options.eventTime;
  // The clock is read before the lag: everything committed before it is consumed on a caught-up partition.
  const clock = Date.now();
  let caughtUp: Set<string> | undefined;
  if (processingTime) {
    try {
      caughtUp = await caughtUpPartitions(rt, queen);
    } catch (err) {
      rt.report(err, { phase: 'flush' });
      return;
    }
  }
  const now = Date.now();
  for (const [partitionId, info] of [...rt.touched]) {
    if (rt.isStopped()) return;
    if (now - info.lastTouchedMs > TOUCHED_WINDOW_MS) {
      rt.touched.delete(partitionId);
      continue;
    }
    if (caughtUp && !caughtUp.has(partitionId)) continue;
    try {
      await rt.locks.run(partitionId, () => flushPartition(rt, partitionId, info.partition, processingTime ? clock : undefined));
    } catch (err) {
      rt.report(err, { phase: 'flush', partitionId });
    }
  }
}
