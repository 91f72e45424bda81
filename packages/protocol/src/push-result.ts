import type { PushResult } from './push.js';

/** What a pushed item says about itself that a result repeats. */
interface PushedItem {
  queue: string;
  transactionId?: string;
  traceId?: string;
}

/**
 * The one shaper of a push result (PROTOCOL §5.3; a cycle's push_results,
 * §7.4, and a transaction's push results, §5.7, are the same thing). The
 * allocator answers only what the caller cannot know (status, message id,
 * offset); everything else is the caller's own input: the transactionId is
 * the item's, else the message id; a duplicate carries no trace_id (the
 * stored message's is not the caller's). Here, not in the broker, because
 * @queen-mq/pg answers the same results for a push made inside an
 * application's own transaction.
 */
export function pushResultOf(
  index: number,
  item: PushedItem,
  partitionId: string,
  status: 'queued' | 'duplicate',
  messageId: string,
  offset: string,
): PushResult {
  return {
    index,
    transaction_id: item.transactionId ?? messageId,
    status,
    message_id: messageId,
    partition_id: partitionId,
    queueName: item.queue,
    offset,
    ...(status === 'queued' ? { trace_id: item.traceId ?? null } : {}),
  };
}
