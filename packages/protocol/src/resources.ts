import { z } from 'zod';

// Answers of the read-only resource routes (PROTOCOL §5.10): the queue list,
// a queue's detail and a consumer group's detail. Written once here, so the
// console and the client type them from the protocol rather than each
// restating the broker's shape.

const pagination = z.object({ limit: z.number().int(), offset: z.number().int() });

/** GET /api/v1/resources/queues: one page of queues by name; `total` counts them all. */
export const queueListResponse = z.object({
  queues: z.array(
    z.object({
      name: z.string(),
      namespace: z.string().nullable(),
      task: z.string().nullable(),
      /** Partitions of the queue. */
      partitions: z.number().int(),
      createdAt: z.string(),
    }),
  ),
  pagination,
  total: z.number().int(),
});
export type QueueList = z.infer<typeof queueListResponse>;

/** GET /api/v1/resources/queues/:queue: the queue's options and one page of its partitions; `partitionCount` counts them all. */
export const queueDetailResponse = z.object({
  queue: z.string(),
  queueId: z.string(),
  namespace: z.string().nullable(),
  task: z.string().nullable(),
  options: z.record(z.string(), z.unknown()),
  partitions: z.array(
    z.object({
      id: z.string(),
      name: z.string(),
      firstOffset: z.string(),
      headOffset: z.string(),
      /** Log segments holding the partition's retained messages. */
      segments: z.number().int(),
      createdAt: z.string(),
      lastActivity: z.string(),
    }),
  ),
  pagination,
  partitionCount: z.number().int(),
});
export type QueueDetail = z.infer<typeof queueDetailResponse>;

/** GET /api/v1/consumer-groups/:group: the group's cursor, lag and lease on every partition it has read, and its subscriptions. */
export const groupDetailResponse = z.object({
  name: z.string(),
  partitions: z.array(
    z.object({
      queue: z.string(),
      partition: z.string(),
      partitionId: z.string(),
      cursor: z.string(),
      firstOffset: z.string(),
      headOffset: z.string(),
      /** Messages after the cursor. */
      lag: z.number().int(),
      /** Age in seconds of the oldest message not yet acked; 0 when caught up. */
      timeLag: z.number(),
      leased: z.boolean(),
      leaseExpiresAt: z.string().nullable(),
      lastConsumedAt: z.string().nullable(),
    }),
  ),
  subscriptions: z.array(z.object({ queue: z.string(), mode: z.string(), timestamp: z.string().nullable() })),
});
export type GroupDetail = z.infer<typeof groupDetailResponse>;
