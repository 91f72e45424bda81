import { z } from 'zod';
import type { RouteSpec } from './routes.js';
import { listPageQuery, listSearchQuery, name255, offset, queryInt, queueName } from './values.js';

// Read-only routes the operator's console (packages/console) reads, all
// extensions (PROTOCOL §2 lists none of them). Anything that acts (seek,
// DLQ requeue/delete, drop) goes through the existing routes, whose levels
// decide who may act.

// ---- session ----------------------------------------------------------------

export const consoleSessionResponse = z.object({
  /** The caller's level (`admin` when auth is off). */
  level: z.enum(['read-only', 'read-write', 'admin']),
  subject: z.string().nullable(),
  authEnabled: z.boolean(),
  version: z.string(),
  /** The broker's clock, ISO-8601 UTC: ages and ripeness are measured against it. */
  serverTime: z.string(),
});
export type ConsoleSession = z.infer<typeof consoleSessionResponse>;

// ---- queues -----------------------------------------------------------------

export const consoleQueue = z.object({
  name: z.string(),
  partitions: z.number().int(),
  /** Retained messages after the queue-mode cursor (__QUEUE_MODE__), summed over partitions. */
  depth: z.number().int(),
  /** Messages still retained (head − first + 1, summed). */
  retained: z.number().int(),
  /**
   * Σ headOffset: every message ever appended. Cluster-wide and monotonic, so
   * the difference of two reads over their time apart is the push rate.
   */
  pushedTotal: z.number().int(),
  /**
   * Messages this broker process has handed out by pops since it started
   * (queen_messages_delivered_total): the pop rate's counter. Other replicas
   * count their own.
   */
  deliveredTotal: z.number().int(),
  /** Age in seconds of the oldest message after the queue-mode cursor; 0 when caught up. */
  oldestUnackedSeconds: z.number(),
  /** DLQ entries of the queue, every group. */
  dlq: z.number().int(),
  lastActivity: z.string().nullable(),
});
export const consoleQueuesResponse = z.object({
  queues: z.array(consoleQueue),
  pagination: z.object({ limit: z.number().int(), offset: z.number().int() }),
  total: z.number().int(),
  serverTime: z.string(),
});
export type ConsoleQueues = z.infer<typeof consoleQueuesResponse>;

export const consoleQueueParams = z.object({ queue: queueName });

/**
 * A page of a queue's retained messages, newest first. `before` is an
 * exclusive offset cursor (the previous page's `nextBefore`); `partition`
 * picks one partition, else the first partition by name.
 */
export const consoleMessagesQuery = z.object({
  partition: name255.optional(),
  before: offset.optional(),
  limit: queryInt(1, 500).default(50),
});
export type ConsoleMessagesQuery = z.infer<typeof consoleMessagesQuery>;

export const consoleMessage = z.object({
  id: z.string(),
  transactionId: z.string(),
  offset: z.string(),
  createdAt: z.string(),
  traceId: z.string().nullable(),
  producerSub: z.string().nullable(),
  /** The payload (decrypted for an encrypted queue); null when this broker cannot read it. */
  data: z.unknown(),
  encrypted: z.boolean(),
  /** At or below the queue-mode cursor. */
  acked: z.boolean(),
});
export const consoleMessagesResponse = z.object({
  queue: z.string(),
  partition: z.string(),
  partitionId: z.string(),
  /** The partition names of the queue (first 1000 by name), for a picker. */
  partitions: z.array(z.string()),
  queueModeCursor: z.string(),
  messages: z.array(consoleMessage),
  /** Pass as `before` for the next (older) page; null on the last one. */
  nextBefore: z.string().nullable(),
});
export type ConsoleMessages = z.infer<typeof consoleMessagesResponse>;

// ---- streams ----------------------------------------------------------------

export const streamNameParams = z.object({ name: name255 });

/** The query's source consumer group defaults to the runner's (`streams.<name>`). */
export const streamPartitionsQuery = listPageQuery.extend({ consumerGroup: name255.optional() });

export const streamPartition = z.object({
  partition: z.string(),
  partition_id: z.string(),
  /** Last acked source offset of the group; "0" when nothing is acked (or the group never read it). */
  cursor: z.string(),
  head_offset: z.string(),
  /** Source messages not yet acked by the group. */
  lag: z.number().int(),
  /** Age in seconds of the oldest message not yet acked; 0 when caught up. */
  time_lag: z.number(),
  leased: z.boolean(),
  state_rows: z.number().int(),
  /** State rows that are windows (their value carries a numeric windowEnd). */
  open_windows: z.number().int(),
  /**
   * Event time: the partition's watermark (epoch ms) as its last commit
   * stored it (`__wm__`: the newest event time folded, or idled forward);
   * null in processing time and before the first event.
   */
  watermark: z.number().nullable(),
});
export const streamPartitionsResponse = z.object({
  query_id: z.string(),
  name: z.string(),
  source_queue: z.string(),
  sink_queue: z.string().nullable(),
  consumer_group: z.string(),
  partitions: z.array(streamPartition),
  pagination: z.object({ limit: z.number().int(), offset: z.number().int() }),
  total: z.number().int(),
});
export type StreamPartitions = z.infer<typeof streamPartitionsResponse>;

/** Open windows of a query, soonest end first; `partition` narrows to one source partition. */
export const streamWindowsQuery = z.object({
  partition: name255.optional(),
  limit: queryInt(1, 1000).default(200),
});

export const streamWindow = z.object({
  partition: z.string().nullable(),
  partition_id: z.string(),
  key: z.string(),
  /** The window's key part (after the last U+001F of the state key), as the runner wrote it. */
  window_key: z.string(),
  window_start: z.number().nullable(),
  window_end: z.number(),
  /** The stored accumulator, as the runner wrote it (the reducer's result is computed on flush). */
  value: z.unknown(),
  version: z.number().int(),
  updated_at: z.string(),
  /** window_end ≤ the broker's clock: closes on the next cycle or idle flush once its grace has passed. */
  ripe: z.boolean(),
});
export const streamWindowsResponse = z.object({
  query_id: z.string(),
  name: z.string(),
  /** The broker's clock, epoch ms. */
  now: z.number(),
  windows: z.array(streamWindow),
  /** Open windows in all (of the partition when given); `windows` holds at most `limit` of them. */
  total: z.number().int(),
});
export type StreamWindows = z.infer<typeof streamWindowsResponse>;

export const streamJoinsQuery = z.object({
  partition: name255.optional(),
  limit: queryInt(1, 1000).default(200),
});

/** One partition name of a join: the records it holds per side, and each side's watermark. */
export const streamJoinShard = z.object({
  /** The partition's name (both queues' partitions of that name pair). */
  partition: z.string().nullable(),
  /** The id its state lives under (no partition's id). */
  shard_id: z.string(),
  left: z.object({ watermark: z.number().nullable(), keys: z.number().int(), records: z.number().int() }),
  right: z.object({ watermark: z.number().nullable(), keys: z.number().int(), records: z.number().int() }),
  updated_at: z.string(),
});

export const streamJoinsResponse = z.object({
  query_id: z.string(),
  name: z.string(),
  shards: z.array(streamJoinShard),
  /** Partition names the join holds state for (of the partition when given); `shards` holds at most `limit` of them. */
  total: z.number().int(),
});
export type StreamJoins = z.infer<typeof streamJoinsResponse>;

export const streamCounter = z.object({
  query_id: z.string(),
  name: z.string(),
  /** Cycle elements committed (success:true). */
  cycles: z.number().int(),
  /** Committed cycles that carried no source ack (`ack:null`): the runner's idle flushes. */
  flushes: z.number().int(),
  /** Sink messages stored by committed cycles (window emits, mapped outputs). */
  emitted: z.number().int(),
  /**
   * Sink pushes of committed cycles answered `duplicate` (the id was already
   * stored): a replay, or a window emitted twice under one identity, whose
   * second result was not stored (the runner reports WINDOW_REEMITTED).
   */
  duplicates: z.number().int(),
  /** Cycle elements answered success:false, or that failed with an error. */
  errors: z.number().int(),
  last_cycle_at: z.string().nullable(),
  last_error_at: z.string().nullable(),
  last_error_code: z.string().nullable(),
});
export const streamCountersResponse = z.object({
  /** When this broker process started counting (its start). Counters are per broker process. */
  since: z.string(),
  queries: z.array(streamCounter),
});
export type StreamCounters = z.infer<typeof streamCountersResponse>;

function route<const S extends RouteSpec>(spec: S): S {
  return spec;
}

export const consoleRoutes = {
  consoleSession: route({ method: 'GET', url: '/api/v1/console/session', level: 'read-only', summary: "The caller's level and the broker's clock", response: consoleSessionResponse }),
  consoleQueues: route({
    method: 'GET',
    url: '/api/v1/console/queues',
    level: 'read-only',
    summary: 'Queues with depth, retained messages, push/pop counters, oldest unacked age and DLQ size (paged by name: limit, offset; search by name)',
    query: listSearchQuery,
    response: consoleQueuesResponse,
  }),
  consoleMessages: route({
    method: 'GET',
    url: '/api/v1/console/queues/:queue/messages',
    level: 'read-only',
    summary: "A page of one partition's retained messages with payloads, newest first",
    params: consoleQueueParams,
    query: consoleMessagesQuery,
    response: consoleMessagesResponse,
  }),
  streamsPartitions: route({
    method: 'GET',
    url: '/streams/v1/queries/:name/partitions',
    level: 'read-only',
    summary: "A stream query's source partitions: cursor, lag, state rows, open windows and watermark (paged by name: limit, offset)",
    params: streamNameParams,
    query: streamPartitionsQuery,
    response: streamPartitionsResponse,
  }),
  streamsWindows: route({
    method: 'GET',
    url: '/streams/v1/queries/:name/windows',
    level: 'read-only',
    summary: "A stream query's open windows, soonest end first, with bounds, accumulator and ripeness",
    params: streamNameParams,
    query: streamWindowsQuery,
    response: streamWindowsResponse,
  }),
  streamsJoins: route({
    method: 'GET',
    url: '/streams/v1/queries/:name/joins',
    level: 'read-only',
    summary: "A join's buffered records per partition name and side, with each side's watermark",
    params: streamNameParams,
    query: streamJoinsQuery,
    response: streamJoinsResponse,
  }),
  streamsCounters: route({
    method: 'GET',
    url: '/streams/v1/counters',
    level: 'read-only',
    summary: 'Per-query cycle, flush, emit and error counters of this broker process',
    response: streamCountersResponse,
  }),
} satisfies Record<string, RouteSpec>;
