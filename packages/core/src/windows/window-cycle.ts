import { perRunner, type RunnerContext } from '../context/runner-context.js';
import type { StateRow } from '../context/wire.js';
import { rowsByKey } from '../context/state-api.js';
import { sinkPushItems } from '../commit/sink-output.js';
import { reportDeadEmits, windowEmitItems } from './emit-dead-letter.js';
import { lateOutputs } from './late-record.js';
import { batchClock, foldWindowBatch, prepareWindowBatch, type PreparedWindowBatch } from './window-batch.js';
import { commitCycle, outcomeOf, retryOnConflict, type CycleOptions, type Outcome, type PartitionBatch } from '../commit/commit.js';
import { WATERMARK_KEY, windowKeyPrefix } from '../plan/keys.js';
import { carriedRows, carryRows } from '../commit/carried-state.js';
import { closeHorizonKey } from './close-horizon.js';

// The window cycle, in one place: prepare the batch, read the state it
// needs, fold (window-batch.ts, pure), hand the emits to the sink, commit.

/**
 * One window cycle over one partition's batch. Until it commits, the idle
 * flush must not close windows the batch may belong to (the touched entry is
 * marked awaiting redelivery); a commit marks the partition touched now.
 * A VERSION_CONFLICT re-reads and recomputes (the fold is pure).
 */
export async function windowCycle(rt: RunnerContext, batch: PartitionBatch, opts: CycleOptions): Promise<Outcome> {
  rt.touched.set(batch.partitionId, { partition: batch.partition, lastTouchedMs: rt.clock.local(), awaitingRedelivery: true, markedAt: performance.now() });
  const { plan } = rt;
  const prepared = prepareWindowBatch(plan, batch.messages);
  const last = batch.messages[batch.messages.length - 1]!;

  return retryOnConflict(rt, batch.partitionId, async () => {
    let read: WindowStateRead;
    try {
      read = await readWindowState(rt, batch.partitionId, prepared, batch.messages[0]!.offset);
    } catch (err) {
      rt.report(err, { phase: 'state-get', partitionId: batch.partitionId });
      return 'none';
    }
    const fold = foldWindowBatch(plan, prepared, read.stored, read.ripeRows, read.clock);
    const { pushItems, dead, byTransactionId } = await windowEmitItems(rt, batch.partitionId, batch.partition, fold.emits, opts.effectsDone);
    if (fold.late.length > 0) {
      // Late records ride the same cycle: pushed in the transaction that commits the state and the ack.
      const late = lateOutputs({ queryName: rt.queryName, partition: batch.partition, partitionId: batch.partitionId }, fold.late);
      pushItems.push(...(await sinkPushItems(plan.window!.options.lateSink, rt.queryId, batch.partitionId, late, opts.effectsDone)));
    }
    const result = await commitCycle(rt, {
      partitionId: batch.partitionId,
      partition: batch.partition,
      stateOps: fold.stateOps,
      pushItems,
      ack: { transactionId: last.transactionId, leaseId: batch.leaseId, status: 'completed' },
      releaseLease: opts.releaseLease,
      messages: batch.messages.length,
      emits: fold.emits.length,
      late: fold.lateDropped,
      windowEmits: byTransactionId,
      onCommitted(res) {
        if (read.whole) carryRows(rt, batch.partitionId, last.offset, read.whole, fold.stateOps, new Map(res.state_results.map((r) => [r.key, r.version])));
        rt.touched.set(batch.partitionId, { partition: batch.partition, lastTouchedMs: rt.clock.local() });
        rt.metrics.lateEventsTotal += fold.lateDropped;
        reportDeadEmits(rt, dead);
      },
    });
    return outcomeOf(result);
  });
}

/** What a window cycle reads before it folds (see foldWindowBatch). */
export interface WindowStateRead {
  /** The rows of (at least) the touched keys and `__wm__` (event time) or the close horizon (processing time). */
  stored: Map<string, StateRow>;
  /** Rows of the operator with `value.windowEnd <= clock − grace`, in the read's order (the server's key order; carried rows, theirs: only the order of the deletes depends on it). */
  ripeRows: StateRow[];
  clock: number | undefined;
  /** Every row of the partition under the read's prefix, when it was read whole (or carried) in processing time. */
  whole?: StateRow[];
}

/**
 * A partition whose last whole-partition read returned more rows than this
 * (or more than twice the keys its batch touched) is read the split way:
 * shipping every open row each cycle would then cost more than the second
 * round trip it saves.
 */
const WHOLE_READ_MAX_ROWS = 256;
/** A split partition tries one whole read again after this many cycles (its rows may have closed). */
const WHOLE_READ_RETRY_CYCLES = 64;

/** Per runner, per partition: rows of the last whole read, and split cycles since. */
const partitionSizes = new WeakMap<RunnerContext, Map<string, { rows: number; splitCycles: number }>>();

/**
 * Reads the state of one window cycle. The fold needs two sets: the rows of
 * the keys the batch touches (plus `__wm__` in event time) and the ripe rows
 * of the operator at the batch's clock. Asked separately that is two
 * state/get round trips per cycle, the second waiting on the first in event
 * time (the clock depends on the stored watermark). When the partition holds
 * few rows — the usual case: a tumbling window keeps one or two open windows
 * per key — ONE read of all its rows answers both: the touched rows are looked
 * up in it, and the ripe rows are filtered here with exactly the server's
 * filter (key prefix AND `value.windowEnd` a number ≤ clock − grace), keeping
 * its key order. A window query's state holds only its window rows and
 * `__wm__`, so the unfiltered read is bounded by those.
 */
export async function readWindowState(rt: RunnerContext, partitionId: string, prepared: PreparedWindowBatch, firstOffset: string): Promise<WindowStateRead> {
  const { plan } = rt;
  const { options, tag } = plan.window!;
  // The batch is judged late against `__wm__` (event time) or the close horizon (processing time): read it with the keys.
  const keys = [...prepared.touchedKeys, options.eventTime ? WATERMARK_KEY : closeHorizonKey(tag)];
  const prefix = windowKeyPrefix(tag);
  const sizes = perRunner(partitionSizes, rt);
  const size = sizes.get(partitionId);

  // Processing time only: there an idle flush (this runner's or another's)
  // deletes rows and raises the close horizon; a later cycle that touches a
  // deleted row, or writes the horizon, fails its compare-and-set and reads
  // afresh (a value for a window the flush closed is then judged late). In
  // event time a flush may move the watermark, which a cycle need not write.
  const carried = options.eventTime ? undefined : carriedRows(rt, partitionId, firstOffset);
  const whole = carried !== undefined || !size || size.rows <= Math.max(WHOLE_READ_MAX_ROWS, 2 * keys.length) || size.splitCycles >= WHOLE_READ_RETRY_CYCLES;
  if (whole) {
    // Event time needs `__wm__` (outside the window prefix): read the partition unfiltered.
    const rows =
      carried ??
      (await rt.api.stateGet(
        options.eventTime ? { query_id: rt.queryId, partition_id: partitionId } : { query_id: rt.queryId, partition_id: partitionId, key_prefix: prefix },
      ));
    sizes.set(partitionId, { rows: rows.length, splitCycles: 0 });
    const stored = rowsByKey(rows);
    const clock = batchClock(plan, prepared, stored);
    const carry = options.eventTime || rows.length > WHOLE_READ_MAX_ROWS ? undefined : rows;
    if (clock === undefined) return { stored, ripeRows: [], clock, whole: carry };
    const ripeAtOrBefore = clock - options.gracePeriodMs;
    const ripeRows = rows.filter((r) => r.key.startsWith(prefix) && typeof r.value?.windowEnd === 'number' && r.value.windowEnd <= ripeAtOrBefore);
    return { stored, ripeRows, clock, whole: carry };
  }

  size!.splitCycles += 1;
  const readKeys = () => rt.api.stateGet({ query_id: rt.queryId, partition_id: partitionId, keys });
  const readRipe = (clock: number) =>
    rt.api.stateGet({ query_id: rt.queryId, partition_id: partitionId, key_prefix: prefix, ripe_at_or_before: clock - options.gracePeriodMs });
  if (!options.eventTime) {
    // Processing time: the clock is the batch's newest createdAt, known before any read, so both reads run at once.
    const clock = batchClock(plan, prepared, new Map());
    const [keyed, ripeRows] = await Promise.all([readKeys(), clock === undefined ? Promise.resolve([]) : readRipe(clock)]);
    return { stored: rowsByKey(keyed), ripeRows, clock };
  }
  const stored = rowsByKey(await readKeys());
  const clock = batchClock(plan, prepared, stored);
  return { stored, ripeRows: clock === undefined ? [] : await readRipe(clock), clock };
}
