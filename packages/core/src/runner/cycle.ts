import type { SourceMessage } from '../context/source-message.js';
import type { StateRow } from '../context/wire.js';
import type { RunnerContext } from '../context/runner-context.js';
import { rowsByKey } from '../context/state-api.js';
import { runPreStages, OperatorError } from '../commit/pre-ops.js';
import { sinkOutputs, type EffectsDone, type SinkOutput } from '../commit/sink-output.js';
import { evaluateGateBatch, GateEvalError, prepareGateBatch } from '../gate/gate-batch.js';
import { messageIdentity } from '../commit/transaction-id.js';
import { failPoisonMessage, poisonIndex, poisonPhase } from './poison.js';
import { commitCycle, outcomeOf, retryOnConflict, type CycleOptions, type Outcome, type PartitionBatch } from '../commit/commit.js';
import { windowCycle } from '../windows/window-cycle.js';
import { traceCycle } from '../commit/tracing.js';
import { LookupReads } from '../commit/lookup-reads.js';
import { joinCycle } from '../joins/join-cycle.js';

export type { PartitionBatch } from '../commit/commit.js';

function shapeCycle(rt: RunnerContext, batch: PartitionBatch, opts: CycleOptions): Promise<Outcome> {
  if (rt.plan.shape === 'window') return windowCycle(rt, batch, opts);
  if (rt.plan.shape === 'gate') return gateCycle(rt, batch, opts);
  if (rt.plan.shape === 'join') return joinCycle(rt, batch, opts);
  return statelessCycle(rt, batch, opts);
}

/**
 * One cycle for one partition's batch: read the state it needs, run the
 * operators, commit state ops + sink pushes + ack in one request. Never
 * throws: failures go to onError and leave the batch to its lease.
 *
 * A user function that throws on one message (an operator, a reducer
 * extractor, the gate, a sink), or a message the window stage cannot place
 * (its eventTime is unusable, the window's assign throws), makes that
 * message poison: the messages before
 * it are recomputed alone and committed under the lease (release_lease:false),
 * then the poison one is acked `failed` — the broker charges it one failure
 * and redelivers it, or, past the source queue's retryLimit, dead-letters it
 * and moves the cursor past it (poison.ts). The messages after it come back
 * in the next pop. Effects of a foreach sink run once per emit across all
 * the recomputations of this batch.
 */
export function processPartitionBatch(rt: RunnerContext, batch: PartitionBatch): Promise<void> {
  // Traced, the cycle is a `process` span, parented by the batch's first traced message.
  return traceCycle(rt, batch, () => processBatch(rt, batch));
}

async function processBatch(rt: RunnerContext, batch: PartitionBatch): Promise<void> {
  const effectsDone: EffectsDone = new Set();
  let messages = batch.messages;
  let poison: { message: SourceMessage; error: Error } | undefined;
  try {
    for (;;) {
      try {
        const outcome = messages.length === 0 ? 'committed' : await shapeCycle(rt, messages === batch.messages ? batch : { ...batch, messages }, { releaseLease: !poison, effectsDone });
        // The poison message is the head now only if everything before it was acked.
        if (poison && outcome === 'committed') await failPoisonMessage(rt, batch, poison.message, poison.error);
        return;
      } catch (err) {
        const index = poisonIndex(err, messages);
        if (index < 0) throw err;
        const message = messages[index]!;
        rt.report(err, { phase: poisonPhase(err), partitionId: batch.partitionId, offset: message.offset });
        poison = { message, error: err as Error };
        messages = messages.slice(0, index);
      }
    }
  } catch (err) {
    const phase = err instanceof GateEvalError ? 'gate-eval' : err instanceof OperatorError ? 'operator' : 'cycle';
    rt.report(err, { phase, partitionId: batch.partitionId });
  }
}

async function gateCycle(rt: RunnerContext, batch: PartitionBatch, opts: CycleOptions): Promise<Outcome> {
  const { plan } = rt;
  const prepared = prepareGateBatch(plan, batch.messages);
  return retryOnConflict(rt, batch.partitionId, async () => {
    let stored: Map<string, StateRow>;
    try {
      stored = rowsByKey(await rt.api.stateGet({ query_id: rt.queryId, partition_id: batch.partitionId, keys: prepared.keys }));
    } catch (err) {
      rt.report(err, { phase: 'state-get', partitionId: batch.partitionId });
      return 'none';
    }
    // The gate's clock is the broker's too: a partition that moves to a runner with another clock sees one time line.
    const result = await evaluateGateBatch(plan, prepared, stored, () => rt.clock.now());
    if (result.denied) rt.metrics.gateDenialsTotal += 1;
    // First message denied: no request at all; the lease expires and the batch returns in order.
    if (result.allowedMessages === 0) return 'partial';
    const outputs: SinkOutput[] = result.outputs.map((o) => ({
      identity: o.identity,
      values: o.values,
      ctx: { partition: batch.partition, partitionId: batch.partitionId, key: o.key, offset: o.message.offset },
    }));
    const pushItems = await sinkOutputs(plan, rt.queryId, batch.partitionId, outputs, opts.effectsDone);
    const lastAllowed = batch.messages[result.allowedMessages - 1]!;
    const committed = await commitCycle(rt, {
      partitionId: batch.partitionId,
      partition: batch.partition,
      stateOps: result.stateOps,
      pushItems,
      ack: {
        transactionId: lastAllowed.transactionId,
        leaseId: batch.leaseId,
        status: 'completed',
        ...(result.denied ? { count: result.allowedMessages } : {}),
      },
      // A deny keeps the lease: the denied tail stays leased and returns, in order, when it expires.
      releaseLease: !result.denied && opts.releaseLease,
      messages: result.allowedMessages,
      emits: result.outputs.length,
      onCommitted: () => void (rt.metrics.gateAllowsTotal += result.allows),
    });
    return outcomeOf(committed, result.denied ? 'partial' : 'committed');
  });
}

async function statelessCycle(rt: RunnerContext, batch: PartitionBatch, opts: CycleOptions): Promise<Outcome> {
  if (rt.plan.lookups) return retryOnConflict(rt, batch.partitionId, () => statelessAttempt(rt, batch, opts));
  // No state ops and no KV reads: nothing can conflict, so no retry loop.
  const committed = await statelessAttempt(rt, batch, opts);
  return committed === 'conflict' ? 'none' : committed;
}

/**
 * One attempt of a stateless cycle. With a lookup, every KV key the batch
 * needs is read first (one read per key, in rounds when a lookup's key
 * depends on an earlier lookup's value), and the commit carries the versions
 * read: a KV write since answers VERSION_CONFLICT, and the batch is
 * recomputed with fresh reads.
 */
async function statelessAttempt(rt: RunnerContext, batch: PartitionBatch, opts: CycleOptions): Promise<Outcome | 'conflict'> {
  const { plan } = rt;
  let reads: LookupReads | undefined;
  if (plan.lookups) {
    reads = new LookupReads();
    try {
      do for (const m of batch.messages) runPreStages(plan.pre, m, reads);
      while (await reads.readWanted(rt.api));
    } catch (err) {
      if (err instanceof OperatorError) throw err;
      rt.report(err, { phase: 'state-get', partitionId: batch.partitionId });
      return 'none';
    }
  }
  const outputs: SinkOutput[] = batch.messages.map((m) => ({
    identity: messageIdentity(m.offset),
    values: runPreStages(plan.pre, m, reads).map((v) => v.value),
    ctx: { partition: batch.partition, partitionId: batch.partitionId, key: m.partitionId, offset: m.offset },
  }));
  const pushItems = await sinkOutputs(plan, rt.queryId, batch.partitionId, outputs, opts.effectsDone);
  const last = batch.messages[batch.messages.length - 1]!;
  const committed = await commitCycle(rt, {
    partitionId: batch.partitionId,
    partition: batch.partition,
    stateOps: [],
    pushItems,
    ...(reads ? { kvReads: reads.wire() } : {}),
    ack: { transactionId: last.transactionId, leaseId: batch.leaseId, status: 'completed' },
    releaseLease: opts.releaseLease,
    messages: batch.messages.length,
    emits: outputs.length,
  });
  return outcomeOf(committed);
}
