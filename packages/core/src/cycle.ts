import type { SourceMessage } from './source-message.js';
import { QueenError, isErrorCode } from '@queen-mq/protocol';
import type { CycleRequest, CycleResponse, StateOp, StateRow } from './wire.js';
import type { RunnerContext } from './runner-context.js';
import { rowsByKey } from './state-api.js';
import { runPostStages, runPreStages, OperatorError } from './pre-ops.js';
import { sinkOutputs, type EffectsDone, type SinkOutput } from './sink-output.js';
import { foldWindowBatch, prepareWindowBatch, type WindowEmit } from './window-batch.js';
import { readWindowState, type WindowStateRead } from './window-state-read.js';
import { evaluateGateBatch, GateEvalError, prepareGateBatch } from './gate-batch.js';
import { messageIdentity } from './transaction-id.js';
import { failPoisonMessage, poisonIndex } from './poison.js';

/** The messages one pop delivered from one partition, under one lease. */
export interface PartitionBatch {
  partitionId: string;
  partition: string;
  leaseId: string;
  messages: SourceMessage[];
}

/** How often a batch is recomputed after VERSION_CONFLICT before it is left to the lease. */
const MAX_CONFLICT_RETRIES = 8;

/** Outcome codes that mean "this batch's lease is gone": nothing applied, the batch comes back. */
const LEASE_LOST = new Set(['LEASE_EXPIRED', 'ALREADY_ACKED', 'MESSAGE_NOT_FOUND', 'MESSAGE_NOT_LEASED', 'ACK_COUNT_MISMATCH']);

export function emitOutputs(rt: RunnerContext, partitionId: string, partition: string, emits: readonly WindowEmit[]): SinkOutput[] {
  return emits.map((e) => {
    const ctx = { partition, partitionId, key: e.userKey, windowKey: e.windowKey, windowStart: e.windowStart, windowEnd: e.windowEnd };
    return { identity: e.identity, values: runPostStages(rt.plan.post, e.value, ctx), ctx };
  });
}

function baseBody(rt: RunnerContext, batch: PartitionBatch, stateOps: StateOp[], pushItems: CycleRequest['push_items']): Omit<CycleRequest, 'ack'> {
  return { query_id: rt.queryId, partition_id: batch.partitionId, consumer_group: rt.consumerGroup, state_ops: stateOps, push_items: pushItems };
}

/** A cycle answered success:false: the server's catalogue code, as a QueenError. */
export function cycleFailure(res: CycleResponse): QueenError {
  const code = isErrorCode(res.code) ? res.code : 'INTERNAL_ERROR';
  return new QueenError(code, `cycle failed: ${res.error ?? res.code ?? 'no error given'}`, { status: 200, extra: { partition_id: res.partition_id } });
}

function lost(rt: RunnerContext, batch: PartitionBatch, res: CycleResponse): void {
  rt.events.emit('lease:lost', { partitionId: batch.partitionId, leaseId: batch.leaseId, code: res.code ?? 'UNKNOWN' });
}

/**
 * How one shape's cycle over a batch ended: every message acked, a prefix
 * acked (a gate deny), or nothing committed (the batch returns with its lease).
 */
type Outcome = 'committed' | 'partial' | 'none';

/** Per batch: whether the cycle ends the lease, and the effects it already ran. */
interface CycleOptions {
  /** false while a poison message after this batch still needs its lease (see processPartitionBatch). */
  releaseLease: boolean;
  effectsDone: EffectsDone;
}

function shapeCycle(rt: RunnerContext, batch: PartitionBatch, opts: CycleOptions): Promise<Outcome> {
  if (rt.plan.shape === 'window') return windowCycle(rt, batch, opts);
  if (rt.plan.shape === 'gate') return gateCycle(rt, batch, opts);
  return statelessCycle(rt, batch, opts);
}

/**
 * One cycle for one partition's batch: read the state it needs, run the
 * operators, commit state ops + sink pushes + ack in one request. Never
 * throws: failures go to onError and leave the batch to its lease.
 *
 * A user function that throws on one message (an operator, a reducer
 * extractor, the gate, a sink) makes that message poison: the messages before
 * it are recomputed alone and committed under the lease (release_lease:false),
 * then the poison one is acked `failed` — the broker charges it one failure
 * and redelivers it, or, past the source queue's retryLimit, dead-letters it
 * and moves the cursor past it (poison.ts). The messages after it come back
 * in the next pop. Effects of a foreach sink run once per emit across all
 * the recomputations of this batch.
 */
export async function processPartitionBatch(rt: RunnerContext, batch: PartitionBatch): Promise<void> {
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
        rt.report(err, { phase: err instanceof GateEvalError ? 'gate-eval' : 'operator', partitionId: batch.partitionId, offset: message.offset });
        poison = { message, error: err as Error };
        messages = messages.slice(0, index);
      }
    }
  } catch (err) {
    const phase = err instanceof GateEvalError ? 'gate-eval' : err instanceof OperatorError ? 'operator' : 'cycle';
    rt.report(err, { phase, partitionId: batch.partitionId });
  }
}

async function windowCycle(rt: RunnerContext, batch: PartitionBatch, opts: CycleOptions): Promise<Outcome> {
  // Until this batch commits, the idle flush must not close windows it may belong to.
  rt.touched.set(batch.partitionId, { partition: batch.partition, lastTouchedMs: rt.clock.local(), awaitingRedelivery: true, markedAt: performance.now() });
  return windowCycleAttempts(rt, batch, opts);
}

async function windowCycleAttempts(rt: RunnerContext, batch: PartitionBatch, opts: CycleOptions): Promise<Outcome> {
  const { plan } = rt;
  const prepared = prepareWindowBatch(plan, batch.messages);
  for (const s of prepared.skipped) rt.report(s.error, { phase: 'window-apply', partitionId: batch.partitionId, offset: s.message.offset });
  const last = batch.messages[batch.messages.length - 1]!;

  for (let attempt = 0; attempt <= MAX_CONFLICT_RETRIES && !rt.isStopped(); attempt++) {
    let read: WindowStateRead;
    try {
      read = await readWindowState(rt, batch.partitionId, prepared);
    } catch (err) {
      rt.report(err, { phase: 'state-get', partitionId: batch.partitionId });
      return 'none';
    }
    const { stored, ripeRows, clock } = read;
    const fold = foldWindowBatch(plan, prepared, stored, ripeRows, clock);
    const outputs = emitOutputs(rt, batch.partitionId, batch.partition, fold.emits);
    const pushItems = await sinkOutputs(plan, rt.queryId, batch.partitionId, outputs, opts.effectsDone);
    const res = await rt.api.cycle({
      ...baseBody(rt, batch, fold.stateOps, pushItems),
      ack: { transactionId: last.transactionId, leaseId: batch.leaseId, status: 'completed' },
      release_lease: opts.releaseLease,
    });
    if (res.success) {
      rt.touched.set(batch.partitionId, { partition: batch.partition, lastTouchedMs: rt.clock.local() });
      rt.metrics.cyclesTotal += 1;
      rt.metrics.messagesTotal += batch.messages.length;
      rt.metrics.lateEventsTotal += fold.lateDropped;
      rt.events.emit('cycle:commit', {
        partitionId: batch.partitionId,
        partition: batch.partition,
        messages: batch.messages.length,
        stateOps: fold.stateOps.length,
        pushes: pushItems.length,
        emits: fold.emits.length,
      });
      return 'committed';
    }
    if (res.code === 'VERSION_CONFLICT') continue; // a flush or another writer moved a row: reload and recompute
    return notCommitted(rt, batch, res);
  }
  return conflictsExhausted(rt, batch);
}

/** A cycle answered success:false with something other than VERSION_CONFLICT. */
function notCommitted(rt: RunnerContext, batch: PartitionBatch, res: CycleResponse): Outcome {
  if (res.code && LEASE_LOST.has(res.code)) lost(rt, batch, res);
  else rt.report(cycleFailure(res), { phase: 'cycle', partitionId: batch.partitionId });
  return 'none';
}

function conflictsExhausted(rt: RunnerContext, batch: PartitionBatch): Outcome {
  if (rt.isStopped()) return 'none';
  rt.report(new Error(`cycle gave up after ${MAX_CONFLICT_RETRIES + 1} VERSION_CONFLICTs; the batch returns when its lease expires`), {
    phase: 'cycle',
    partitionId: batch.partitionId,
  });
  return 'none';
}

async function gateCycle(rt: RunnerContext, batch: PartitionBatch, opts: CycleOptions): Promise<Outcome> {
  const { plan } = rt;
  const prepared = prepareGateBatch(plan, batch.messages);
  for (let attempt = 0; attempt <= MAX_CONFLICT_RETRIES && !rt.isStopped(); attempt++) {
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
    const res = await rt.api.cycle({
      ...baseBody(rt, batch, result.stateOps, pushItems),
      ack: {
        transactionId: lastAllowed.transactionId,
        leaseId: batch.leaseId,
        status: 'completed',
        ...(result.denied ? { count: result.allowedMessages } : {}),
      },
      // A deny keeps the lease: the denied tail stays leased and returns, in order, when it expires.
      release_lease: !result.denied && opts.releaseLease,
    });
    if (res.success) {
      rt.metrics.cyclesTotal += 1;
      rt.metrics.messagesTotal += result.allowedMessages;
      rt.metrics.gateAllowsTotal += result.allows;
      rt.events.emit('cycle:commit', {
        partitionId: batch.partitionId,
        partition: batch.partition,
        messages: result.allowedMessages,
        stateOps: result.stateOps.length,
        pushes: pushItems.length,
        emits: result.outputs.length,
      });
      return result.denied ? 'partial' : 'committed';
    }
    if (res.code === 'VERSION_CONFLICT') continue;
    return notCommitted(rt, batch, res);
  }
  return conflictsExhausted(rt, batch);
}

async function statelessCycle(rt: RunnerContext, batch: PartitionBatch, opts: CycleOptions): Promise<Outcome> {
  const { plan } = rt;
  const outputs: SinkOutput[] = batch.messages.map((m) => ({
    identity: messageIdentity(m.offset),
    values: runPreStages(plan.pre, m).map((v) => v.value),
    ctx: { partition: batch.partition, partitionId: batch.partitionId, key: m.partitionId, offset: m.offset },
  }));
  const pushItems = await sinkOutputs(plan, rt.queryId, batch.partitionId, outputs, opts.effectsDone);
  const last = batch.messages[batch.messages.length - 1]!;
  const res = await rt.api.cycle({
    ...baseBody(rt, batch, [], pushItems),
    ack: { transactionId: last.transactionId, leaseId: batch.leaseId, status: 'completed' },
    release_lease: opts.releaseLease,
  });
  if (res.success) {
    rt.metrics.cyclesTotal += 1;
    rt.metrics.messagesTotal += batch.messages.length;
    rt.events.emit('cycle:commit', {
      partitionId: batch.partitionId,
      partition: batch.partition,
      messages: batch.messages.length,
      stateOps: 0,
      pushes: pushItems.length,
      emits: outputs.length,
    });
    return 'committed';
  }
  return notCommitted(rt, batch, res);
}
