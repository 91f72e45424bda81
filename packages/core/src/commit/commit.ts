import { QueenError, isErrorCode } from '@queen-mq/protocol';
import type { SourceMessage } from '../context/source-message.js';
import type { CycleAck, CycleKvReadWire, CyclePushItem, CycleResponse, CycleSourceAckWire, StateOp } from '../context/wire.js';
import type { RunnerContext } from '../context/runner-context.js';
import type { EffectsDone } from './sink-output.js';
import { traceCommit } from './tracing.js';
import { forgetCarried } from './carried-state.js';
import { reportReemittedWindows, type EmitsByTransactionId } from './reemit-report.js';
import { sleep } from '../context/sleep.js';

// The one commit path of the runner: every cycle (window, gate, stateless)
// and every idle flush sends its state ops, pushes and ack through
// commitCycle, which interprets the answer, counts it and emits its event.

/** The messages one pop delivered from one partition, under one lease. */
export interface PartitionBatch {
  partitionId: string;
  partition: string;
  leaseId: string;
  messages: SourceMessage[];
  /** A join's batch: which of its two source queues it was popped from. */
  side?: 'left' | 'right';
}

/**
 * How one shape's cycle over a batch ended: every message acked, a prefix
 * acked (a gate deny), or nothing committed (the batch returns with its lease).
 */
export type Outcome = 'committed' | 'partial' | 'none';

/** Per batch: whether the cycle ends the lease, and the effects it already ran. */
export interface CycleOptions {
  /** false while a poison message after this batch still needs its lease (see processPartitionBatch). */
  releaseLease: boolean;
  effectsDone: EffectsDone;
}

/** One commit: a cycle over a batch (with its source ack) or an idle flush (ack null). */
export interface Commit {
  partitionId: string;
  partition: string;
  stateOps: StateOp[];
  pushItems: CyclePushItem[];
  /** The source ack (carrying the batch's lease), or null for an idle flush. */
  ack: (CycleAck & { leaseId: string }) | null;
  /**
   * A join's acks: each source partition's batch, by its partition id (the
   * commit's `partitionId` is then the join's shard, no source partition);
   * with `ack` null. Counted as a cycle, like `ack`.
   */
  sourceAcks?: CycleSourceAckWire[];
  /** A lookup's KV reads: the cycle commits only if each still has the version read (else VERSION_CONFLICT: recompute). */
  kvReads?: CycleKvReadWire[];
  /** With an ack: release the lease on commit (the route's default is true). */
  releaseLease?: boolean;
  /**
   * An idle flush's guard (broker time, epoch ms): the broker commits the
   * flush only once every source message stamped before it is consumed,
   * else answers FLUSH_DEFERRED (see idle-flush.ts).
   */
  flushBefore?: number;
  /** A join's flush: the source partitions (queue, partition name) `flushBefore` guards, instead of `partitionId` (its shard). */
  flushSources?: { queue: string; partition: string }[];
  /** Source messages the ack settles (the `cycle:commit` count; 0 for a flush). */
  messages: number;
  /** Window emits or per-message outputs handed to the sink. */
  emits: number;
  /** Late events of the batch (sent with the cycle for the broker's history; counted in lateEventsTotal on commit). */
  late?: number;
  /** A window cycle's or flush's emits by their items' transactionIds: one answered `duplicate` is reported (reemit-report.ts). */
  windowEmits?: EmitsByTransactionId;
  /** Runs on success before the counters and the event (shape-specific bookkeeping). */
  onCommitted?: (res: CycleResponse) => void;
}

/**
 * How a commit ended: applied, lost a compare-and-set race (recompute), a
 * flush the broker held back (a message it may close over is still pending),
 * or not applied (already reported).
 */
type CommitResult = 'committed' | 'conflict' | 'deferred' | 'not-committed';

/** How often a batch is recomputed after VERSION_CONFLICT before it is left to the lease. */
export const MAX_CONFLICT_RETRIES = 8;

/** The longest wait between two tries of a cycle whose sink queue is full (ms); the first is the broker's retryAfter. */
const SINK_FULL_MAX_WAIT_MS = 5000;

/** Outcome codes that mean "this batch's lease is gone": nothing applied, the batch comes back. */
const LEASE_LOST = new Set(['LEASE_EXPIRED', 'ALREADY_ACKED', 'MESSAGE_NOT_FOUND', 'MESSAGE_NOT_LEASED', 'ACK_COUNT_MISMATCH']);

/** A cycle answered success:false: the server's catalogue code, as a QueenError. */
function cycleFailure(res: CycleResponse): QueenError {
  const code = isErrorCode(res.code) ? res.code : 'INTERNAL_ERROR';
  return new QueenError(code, `cycle failed: ${res.error ?? res.code ?? 'no error given'}`, { status: 200, extra: { partition_id: res.partition_id } });
}

/**
 * Sends one cycle (POST /streams/v1/cycle) and interprets the answer. On
 * success: the commit's own bookkeeping, the counters (a cycle: cyclesTotal
 * and messagesTotal; a flush: flushCyclesTotal) and the event (`cycle:commit`
 * or `window:flush`). VERSION_CONFLICT answers 'conflict' (the caller
 * recomputes from fresh rows); FLUSH_DEFERRED answers 'deferred'; a lost lease emits `lease:lost`; any other
 * refusal goes to onError (phase `cycle`, or `flush`). A transport failure
 * rejects (the caller's phase reports it).
 *
 * A sink queue at its maxSize (QUEUE_FULL) is backpressure, not a failure:
 * nothing of the cycle was committed, so the same cycle is sent again after
 * a wait (the broker's retryAfter, doubling up to SINK_FULL_MAX_WAIT_MS)
 * until it fits, its lease is gone (then the batch comes back, as any), or
 * the runner stops. Meanwhile this partition's batch stays unacknowledged
 * and the source's lag grows. A flush refused so answers 'deferred' (its
 * next tick tries again).
 */
export async function commitCycle(rt: RunnerContext, c: Commit): Promise<CommitResult> {
  forgetCarried(rt, c.partitionId);
  let res = await sendCommit(rt, c);
  for (let wait = 0; res.code === 'QUEUE_FULL' && !rt.isStopped(); ) {
    wait = wait === 0 ? Math.max(res.retryAfter ?? 1, 0.1) * 1000 : Math.min(wait * 2, SINK_FULL_MAX_WAIT_MS);
    rt.metrics.sinkFullTotal += 1;
    const full = { partitionId: c.partitionId, partition: c.partition, queue: res.queue ?? '', pending: res.pending ?? 0, maxSize: res.maxSize ?? 0 };
    if (!isAcked(c)) {
      rt.events.emit('sink:full', { ...full, waitMs: 0 });
      return 'deferred';
    }
    rt.events.emit('sink:full', { ...full, waitMs: wait });
    await sleep(wait, rt.signal);
    if (rt.isStopped()) return 'not-committed';
    res = await sendCommit(rt, c);
  }
  if (res.code === 'QUEUE_FULL') return 'not-committed';
  return interpret(rt, c, res);
}

/** A cycle that acknowledges source messages (its own batch, or a join's other side); otherwise an idle flush. */
const isAcked = (c: Commit): boolean => c.ack !== null || (c.sourceAcks?.length ?? 0) > 0;

/** One POST /streams/v1/cycle of a commit. */
function sendCommit(rt: RunnerContext, c: Commit): Promise<CycleResponse> {
  const acked = isAcked(c);
  // Traced, the push items carry the commit's push span as their traceparent (tracing.ts).
  return traceCommit(rt, c, (pushItems) =>
    rt.api.cycle({
      query_id: rt.queryId,
      partition_id: c.partitionId,
      consumer_group: rt.consumerGroup,
      state_ops: c.stateOps,
      push_items: pushItems,
      ack: c.ack,
      ...(c.sourceAcks && c.sourceAcks.length > 0 ? { source_acks: c.sourceAcks } : {}),
      ...(c.kvReads && c.kvReads.length > 0 ? { kv_reads: c.kvReads } : {}),
      ...(acked && c.releaseLease !== undefined ? { release_lease: c.releaseLease } : {}),
      ...(!acked && c.flushBefore !== undefined ? { flush_before: c.flushBefore } : {}),
      ...(!acked && c.flushBefore !== undefined && c.flushSources ? { flush_sources: c.flushSources } : {}),
      ...(rt.version ? { version: rt.version } : {}),
      ...(c.late ? { late: c.late } : {}),
    }),
  );
}

/** A commit's answer other than QUEUE_FULL: counters, events, and what the caller does next. */
function interpret(rt: RunnerContext, c: Commit, res: CycleResponse): CommitResult {
  const acked = isAcked(c);
  if (res.success) {
    c.onCommitted?.(res);
    if (c.windowEmits) reportReemittedWindows(rt, res, c.windowEmits, { partitionId: c.partitionId, partition: c.partition, flush: !acked });
    const counts = { partitionId: c.partitionId, partition: c.partition, stateOps: c.stateOps.length, pushes: c.pushItems.length, emits: c.emits };
    if (acked) {
      rt.metrics.cyclesTotal += 1;
      rt.metrics.messagesTotal += c.messages;
      rt.events.emit('cycle:commit', { ...counts, messages: c.messages });
    } else {
      rt.metrics.flushCyclesTotal += 1;
      rt.events.emit('window:flush', counts);
    }
    return 'committed';
  }
  if (res.code === 'VERSION_CONFLICT') return 'conflict';
  // Not a failure: the cycle that reads the pending messages, or a later flush, closes the window.
  if (!acked && res.code === 'FLUSH_DEFERRED') return 'deferred';
  if (res.code === 'QUERY_VERSION_CHANGED') {
    // Two versions of a query never run at once: this one was superseded, so it stops (the batch returns with its lease).
    rt.report(cycleFailure(res), { phase: acked ? 'cycle' : 'flush', partitionId: c.partitionId });
    rt.halt();
    return 'not-committed';
  }
  if (acked && res.code && LEASE_LOST.has(res.code)) {
    for (const a of c.ack ? [{ partitionId: c.partitionId, leaseId: c.ack.leaseId }] : c.sourceAcks!.map((s) => ({ partitionId: s.partition_id, leaseId: s.leaseId! }))) {
      rt.events.emit('lease:lost', { ...a, code: res.code });
    }
  } else {
    rt.report(cycleFailure(res), { phase: acked ? 'cycle' : 'flush', partitionId: c.partitionId });
  }
  return 'not-committed';
}

/**
 * Runs `attempt` (read state, compute, commit) until it does not answer
 * 'conflict', at most MAX_CONFLICT_RETRIES + 1 times and never after the
 * runner stopped; a batch that keeps conflicting is left to its lease.
 */
export async function retryOnConflict(rt: RunnerContext, partitionId: string, attempt: () => Promise<Outcome | 'conflict'>): Promise<Outcome> {
  for (let i = 0; i <= MAX_CONFLICT_RETRIES && !rt.isStopped(); i++) {
    const outcome = await attempt();
    if (outcome !== 'conflict') return outcome;
  }
  if (!rt.isStopped()) {
    rt.report(new Error(`cycle gave up after ${MAX_CONFLICT_RETRIES + 1} VERSION_CONFLICTs; the batch returns when its lease expires`), { phase: 'cycle', partitionId });
  }
  return 'none';
}

/** A commit answer as the cycle's outcome: anything but a commit leaves the batch to its lease. */
export function outcomeOf(result: CommitResult, committed: Outcome = 'committed'): Outcome | 'conflict' {
  return result === 'committed' ? committed : result === 'conflict' ? 'conflict' : 'none';
}
