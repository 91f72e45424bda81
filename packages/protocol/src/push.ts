import { z } from 'zod';
import { name255, queueName, traceparent, uuid } from './values.js';

/** One message to append. `partition` defaults to "Default"; a missing transactionId is generated (UUIDv7). */
export const pushItem = z.object({
  queue: queueName,
  partition: name255.default('Default'),
  payload: z.unknown().optional().transform((v) => (v === undefined ? null : v)),
  transactionId: name255.optional(),
  traceId: uuid.optional(),
  /** Extension: the W3C trace context the message was sent in, handed to its consumers (tracing). */
  traceparent: traceparent.optional(),
});
export type PushItem = z.infer<typeof pushItem>;

export const pushBody = z.object({ items: z.array(pushItem) });
export type PushBody = z.infer<typeof pushBody>;

export const pushResult = z.object({
  index: z.number().int(),
  transaction_id: z.string(),
  status: z.enum(['queued', 'duplicate']),
  message_id: z.string(),
  partition_id: z.string(),
  queueName: z.string(),
  offset: z.string(),
  trace_id: z.string().nullable().optional(),
});
export type PushResult = z.infer<typeof pushResult>;
export const pushResponse = z.array(pushResult);
