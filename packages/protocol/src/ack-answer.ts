import type { AckResult } from './ack.js';
import { errorMessage, isErrorCode } from './errors.js';

/**
 * What queen.log_ack_v2 answers (r_answer): the per-item results of its item-by-item
 * walk, or, for the common request (every item completed inside its lease),
 * the compact form below that ackResultsOf expands. Building the per-item
 * objects in SQL cost as much as the rest of such an ack. Read by the
 * broker's ack routes and by @queen-mq/pg's ack (the same function, called
 * from an application's own transaction).
 */
export type AckAnswer = AckResult[] | { offsets: string[]; released: boolean[]; names: Record<string, [string, string]> };

/**
 * The per-item results of an ack answer, in input order. The walk answers
 * failures by code; their text is the catalogue's.
 */
export function ackResultsOf(items: { transactionId: string; partitionId: string }[], answer: AckAnswer): AckResult[] {
  if (Array.isArray(answer)) return answer.map((r) => (r.code !== null && r.error === null && isErrorCode(r.code) ? { ...r, error: errorMessage(r.code) } : r));
  return items.map((item, index) => {
    const [queueName, partitionName] = answer.names[item.partitionId] ?? [null, null];
    return {
      index,
      transactionId: item.transactionId,
      success: true,
      error: null,
      code: null,
      queueName,
      partitionName,
      leaseReleased: answer.released[index]!,
      dlq: false,
      offset: answer.offsets[index]!,
      alreadyAcked: false,
    };
  });
}
