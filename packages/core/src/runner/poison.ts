import type { ErrorPhase, RunnerContext } from '../context/runner-context.js';
import type { SourceMessage } from '../context/source-message.js';
import type { PartitionBatch } from '../commit/commit.js';
import { OperatorError } from '../commit/pre-ops.js';
import { GateEvalError } from '../gate/gate-batch.js';
import { WindowPlacementError } from '../windows/window-placement.js';

/**
 * The index in `messages` of the source message a user function threw on
 * (or that the window stage could not place), or -1 when the error names
 * none of them (a window emit's post-window operator or sink, or any other
 * failure): that is not a message's fault, and the batch is left to its
 * lease as before.
 */
export function poisonIndex(err: unknown, messages: readonly SourceMessage[]): number {
  const offset = err instanceof OperatorError || err instanceof GateEvalError || err instanceof WindowPlacementError ? err.offset : undefined;
  if (offset === undefined) return -1;
  return messages.findIndex((m) => m.offset === offset);
}

/** The onError phase of a poison message's error. */
export function poisonPhase(err: unknown): ErrorPhase {
  if (err instanceof GateEvalError) return 'gate-eval';
  if (err instanceof WindowPlacementError) return 'window-apply';
  return 'operator';
}

/**
 * Charges one failed delivery to a poison message that is now the head of
 * its partition (everything before it was committed under the same lease),
 * with an ack `failed` on POST /api/v1/ack (PROTOCOL §3.5, §5.5). The broker
 * keeps the count, so it survives runner restarts and needs no copy of the
 * queue's configuration here: below the source queue's `retryLimit` the
 * lease is released and the message is redelivered (the operator runs on it
 * again); past it, the broker dead-letters it with our error text — which
 * names the query — and moves the cursor past it, so the partition moves on.
 * A lost lease (the cycle before took too long) charges nothing: the batch
 * comes back as it was.
 */
export async function failPoisonMessage(rt: RunnerContext, batch: PartitionBatch, message: SourceMessage, error: Error): Promise<void> {
  const text = `stream query "${rt.queryName}" (${rt.queryId}): ${error.message}`;
  const res = await rt.api.failMessage({
    transactionId: message.transactionId,
    partitionId: batch.partitionId,
    leaseId: batch.leaseId,
    consumerGroup: rt.consumerGroup,
    error: text,
  });
  if (!res.success) {
    rt.events.emit('lease:lost', { partitionId: batch.partitionId, leaseId: batch.leaseId, code: res.code ?? 'UNKNOWN' });
    return;
  }
  const deliveries = message.retryCount + 1;
  if (!res.dlq) {
    rt.metrics.poisonRetriesTotal += 1;
    return;
  }
  rt.metrics.messagesDeadLetteredTotal += 1;
  rt.events.emit('message:dead-lettered', {
    partitionId: batch.partitionId,
    partition: batch.partition,
    offset: message.offset,
    transactionId: message.transactionId,
    deliveries,
    error: text,
  });
  rt.logger.warn(
    `queen streams: dead-lettered message ${message.offset} of partition "${batch.partition}" (${batch.partitionId}) on queue "${batch.side === 'right' ? rt.plan.join!.rightQueue : rt.plan.sourceQueue}" after ${deliveries} deliveries — ${text}`,
  );
}
