import { z } from 'zod';
import { isoTime, name255, queryBool, queryInt, queueName } from './values.js';

export const popQueueParams = z.object({ queue: queueName });
export const popPartitionParams = z.object({ queue: queueName, partition: name255 });

/** Limits of PROTOCOL §9 that shape pop validation; the broker passes its configured values. */
export interface PopLimits {
  maxBatch: number;
  maxTimeoutMs: number;
}

export function popQuery(limits: PopLimits = { maxBatch: 10000, maxTimeoutMs: 300000 }) {
  return z.object({
    batch: queryInt(1, limits.maxBatch).default(1),
    wait: queryBool.default(false),
    timeout: queryInt(0, limits.maxTimeoutMs).default(30000),
    consumerGroup: name255.default('__QUEUE_MODE__'),
    autoAck: queryBool.default(false),
    partitions: queryInt(1, 1000).default(1),
    // Queen v1's other spellings, which its clients and examples send:
    // `new-only` for `new`, `from_beginning` for `all`.
    subscriptionMode: z
      .enum(['all', 'new', 'new-only', 'from_beginning'])
      .transform((m) => (m === 'new-only' ? 'new' : m === 'from_beginning' ? 'all' : m))
      .optional(),
    subscriptionFrom: z.union([z.literal('now'), isoTime]).optional(),
  });
}
export type PopQuery = z.infer<ReturnType<typeof popQuery>>;

export const poppedMessage = z.object({
  id: z.string(),
  transactionId: z.string(),
  traceId: z.string().nullable(),
  /** Extension: the W3C trace context the message was pushed in (null when none; absent from brokers before it). */
  traceparent: z.string().nullable().optional(),
  data: z.unknown(),
  producerSub: z.string().nullable(),
  createdAt: z.string(),
  partitionId: z.string(),
  partition: z.string(),
  queue: z.string(),
  leaseId: z.string(),
  consumerGroup: z.string(),
  offset: z.string(),
  retryCount: z.number().int(),
});
export type PoppedMessage = z.infer<typeof poppedMessage>;

export const popResponse = z.object({
  success: z.literal(true),
  queue: z.string(),
  partition: z.string(),
  partitionId: z.string(),
  leaseId: z.string(),
  consumerGroup: z.string(),
  partitionsClaimed: z.number().int(),
  messages: z.array(poppedMessage),
});
export type PopResponse = z.infer<typeof popResponse>;
