import type { RunnerContext } from '../context/runner-context.js';
import type { CyclePushItem } from '../context/wire.js';
import type { WindowEmit } from './window-batch.js';
import { OperatorError, runPostStages } from '../commit/pre-ops.js';
import { sinkOutputs, type EffectsDone } from '../commit/sink-output.js';
import { sinkTransactionId } from '../commit/transaction-id.js';

// A closed window whose post-window operator (or the sink's mapping) throws
// on the emitted value. Before, that error failed the whole cycle: the batch
// came back when its lease expired, the same window closed again from the
// same stored state, the operator threw again — the partition never moved
// on, and every other window closing in that cycle or flush was held back
// with it.
//
// The rule, the window-side twin of a poison source message (poison.ts):
// the emit is dead-lettered, not retried. A source message is redelivered
// per the queue's retryLimit because a delivery may fail for a passing
// reason; a closed window's value is a pure fold of committed state, so a
// retry hands the operator the same value again. The window closes as usual
// (its row is deleted by the cycle or flush that closed it), the emit's
// sink items are replaced by one dead-letter record pushed to the query's
// dead-letter queue in the same transaction (so exactly-once holds: a
// recomputed or redelivered cycle pushes the same transactionId), and every
// other emit, the state and the source ack commit as they would have.
//
// A source message is dead-lettered in the broker's DLQ, which points at the
// stored message. A window's value was never a message: the record is the
// message, in the queue `streams.<query>.dead-letters`, partition = the
// source partition. A `foreach` sink's effect that throws is not covered:
// an effect fails for passing reasons (the service it calls is down), so it
// keeps the retry by lease.

/** The queue a query's dead-lettered window emits go to. */
export function deadLetterQueueOf(queryName: string): string {
  return `streams.${queryName}.dead-letters`;
}

/** The payload of a dead-lettered window emit. */
interface DeadEmitRecord {
  /** The query's name. */
  queryId: string;
  partition: string;
  partitionId: string;
  /** The window's user key (keyBy, or the partition id). */
  key: string;
  /** Window bounds, epoch ms. */
  window: { start: number; end: number };
  /** The operator (or sink) that threw: `map`, `filter`, ..., or the sink's kind. */
  stage: string;
  error: string;
  /** The window's value as it left the window, before the operator that threw. */
  value: unknown;
}

/** The sink push items of a cycle's or flush's window emits, and the emits dead-lettered instead. */
interface WindowEmitItems {
  pushItems: CyclePushItem[];
  dead: DeadEmitRecord[];
  /** Which emit each of those items (sink or dead-letter) came from, by transactionId (for commitCycle's `windowEmits`). */
  byTransactionId: Map<string, WindowEmit>;
}

/** Separator of identity parts (as transaction-id.ts). */
const SEP = '\u001f';

/**
 * Runs the post-window operators and the sink over each emit. An operator
 * or a sink mapping that throws on one emit dead-letters that emit (the
 * others go on); anything else (a foreach effect, a bug) throws as before.
 */
export async function windowEmitItems(
  rt: RunnerContext,
  partitionId: string,
  partition: string,
  emits: readonly WindowEmit[],
  effectsDone?: EffectsDone,
): Promise<WindowEmitItems> {
  const pushItems: CyclePushItem[] = [];
  const dead: DeadEmitRecord[] = [];
  const byTransactionId = new Map<string, WindowEmit>();
  const mapsInSink = rt.plan.sink?.toPushItems !== undefined;
  for (const e of emits) {
    const first = pushItems.length;
    const ctx = { partition, partitionId, key: e.userKey, windowKey: e.windowKey, windowStart: e.windowStart, windowEnd: e.windowEnd };
    try {
      const values = runPostStages(rt.plan.post, e.value, ctx);
      pushItems.push(...(await sinkOutputs(rt.plan, rt.queryId, partitionId, [{ identity: e.identity, values, ctx }], effectsDone)));
    } catch (err) {
      const stage = err instanceof OperatorError ? err.stage : undefined;
      const pure = stage !== undefined && (stage !== rt.plan.sink?.kind || mapsInSink);
      if (!pure) throw err;
      rt.report(err, { phase: 'operator', partitionId });
      const record: DeadEmitRecord = {
        queryId: rt.queryName,
        partition,
        partitionId,
        key: e.userKey,
        window: { start: e.windowStart, end: e.windowEnd },
        stage: stage!,
        error: (err as Error).message,
        value: e.value,
      };
      dead.push(record);
      pushItems.push({
        queue: deadLetterQueueOf(rt.queryName),
        partition,
        payload: record,
        transactionId: sinkTransactionId(rt.queryId, partitionId, `${e.identity}${SEP}dead-letter`, 0),
      });
    }
    for (let i = first; i < pushItems.length; i++) byTransactionId.set(pushItems[i]!.transactionId!, e);
  }
  return { pushItems, dead, byTransactionId };
}

const iso = (ms: number) => (Number.isFinite(ms) ? new Date(ms).toISOString() : String(ms));

/** After the cycle or flush that pushed them committed: the counter, the event and one log line each. */
export function reportDeadEmits(rt: RunnerContext, dead: readonly DeadEmitRecord[]): void {
  for (const d of dead) {
    rt.metrics.emitsDeadLetteredTotal += 1;
    const queue = deadLetterQueueOf(rt.queryName);
    rt.events.emit('emit:dead-lettered', { partitionId: d.partitionId, partition: d.partition, key: d.key, windowStart: d.window.start, windowEnd: d.window.end, queue, error: d.error });
    rt.logger.warn(
      `queen streams: dead-lettered the emit of window [${iso(d.window.start)}, ${iso(d.window.end)}) key "${d.key}" of partition "${d.partition}" (${d.partitionId}) to queue "${queue}" — stream query "${rt.queryName}" (${rt.queryId}): ${d.error}`,
    );
  }
}
