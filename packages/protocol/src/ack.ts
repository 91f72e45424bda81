import { z } from 'zod';
import { name255, uuid } from './values.js';

export const ackStatus = z.enum(['completed', 'success', 'failed', 'dlq', 'retry']);
export type AckStatus = z.infer<typeof ackStatus>;

export const ackItem = z.object({
  transactionId: name255,
  partitionId: uuid,
  status: ackStatus.default('completed'),
  leaseId: uuid.optional(),
  error: z.string().max(10000).optional(),
  /**
   * The message's offset as the pop answered it (an extension to Queen v1):
   * the broker finds the message by its key instead of reading the lease's
   * range. The transactionId still decides: an offset holding another
   * message is ignored.
   */
  offset: z.string().regex(/^[0-9]{1,18}$/, 'a decimal offset of at most 18 digits').optional(),
});
export type AckItem = z.infer<typeof ackItem>;

export const ackBody = ackItem.extend({ consumerGroup: name255.default('__QUEUE_MODE__') });
export const ackBatchBody = z.object({
  consumerGroup: name255.default('__QUEUE_MODE__'),
  acknowledgments: z.array(ackItem).min(1).max(10000),
});

export const ackResult = z.object({
  index: z.number().int(),
  transactionId: z.string(),
  success: z.boolean(),
  error: z.string().nullable(),
  code: z.string().nullable(),
  queueName: z.string().nullable(),
  partitionName: z.string().nullable(),
  leaseReleased: z.boolean(),
  dlq: z.boolean(),
  offset: z.string().nullable(),
  alreadyAcked: z.boolean(),
  /**
   * A failed item held back by the queue's retryDelay: when its consumer
   * group sees the partition again (ISO time). Absent otherwise.
   */
  retryAt: z.string().optional(),
});
export type AckResult = z.infer<typeof ackResult>;
export const ackResponse = z.array(ackResult);
