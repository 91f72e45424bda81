import { z } from 'zod';
import type { RouteSpec } from './routes.js';
import { name255, queueName } from './values.js';

// Read-only history routes (extensions): what the console charts and
// `queen stats` print. The broker keeps counts and samples in minute and
// hour buckets (docs/operations.md, "History"); a route answers one point
// per bucket of the range, oldest first, the current (partial) bucket last,
// zeros where nothing was counted.

/**
 * `1h`: 60 points of one minute. `24h`: 288 points of five minutes.
 * `30d`: 720 points of one hour.
 */
export const historyRange = z.enum(['1h', '24h', '30d']);
export type HistoryRange = z.infer<typeof historyRange>;

/** Seconds per point and points per answer, by range. */
export const historyRanges: Record<HistoryRange, { step: number; points: number }> = {
  '1h': { step: 60, points: 60 },
  '24h': { step: 300, points: 288 },
  '30d': { step: 3600, points: 720 },
};

export const historyQuery = z.object({ range: historyRange.default('1h') });
export type HistoryQuery = z.infer<typeof historyQuery>;

const count = z.number().int();

const historyFrame = {
  range: historyRange,
  /** Seconds per point. */
  step: z.number().int(),
  /** The first point's start and the end of the last one, ISO-8601 UTC. */
  from: z.string(),
  to: z.string(),
};

/**
 * One bucket of a queue (or of every queue). Counts are what happened in
 * the bucket, added by every broker: messages pushed (transaction and stream
 * sink pushes, DLQ requeues and schedule fires included), handed out by pops, ack items
 * applied as completed/success (`acked`) and as failed/dlq (`failed`), and
 * messages dead-lettered. `lag` and `dlq` are samples, one a minute, the
 * largest in the bucket: the queue's depth through the queue-mode cursor
 * (the overview: every consumer group's lag summed) and its DLQ entries.
 */
export const historyPoint = z.object({
  /** The bucket's start, ISO-8601 UTC. */
  t: z.string(),
  pushed: count,
  popped: count,
  acked: count,
  failed: count,
  deadLettered: count,
  lag: count,
  dlq: count,
});
export type HistoryPoint = z.infer<typeof historyPoint>;

/** One bucket of a consumer group on a queue: its pops, acks and dead letters, and its lag (sampled as above). */
export const historyGroupPoint = z.object({
  t: z.string(),
  popped: count,
  acked: count,
  failed: count,
  deadLettered: count,
  lag: count,
});

export const historyOverviewResponse = z.object({
  ...historyFrame,
  points: z.array(historyPoint),
});
export type HistoryOverview = z.infer<typeof historyOverviewResponse>;

export const historyQueueParams = z.object({ queue: queueName });
export const historyQueueResponse = z.object({
  queue: z.string(),
  ...historyFrame,
  /** The queue as a whole; pops, acks and dead letters are its groups' summed. */
  points: z.array(historyPoint),
  /** Each consumer group with a row in the range (at most 100, by name). */
  groups: z.array(z.object({ group: z.string(), points: z.array(historyGroupPoint) })),
});
export type HistoryQueue = z.infer<typeof historyQueueResponse>;

/**
 * One bucket of a stream query: committed cycles (with a source ack) and
 * idle flushes (without), source messages acked, sink messages stored, late
 * events the runner reported, failed cycles, the last commit in the bucket,
 * its lag (source messages its consumer group has not acked; sampled), and
 * in event time the watermark it reached.
 */
export const historyStreamPoint = z.object({
  t: z.string(),
  cycles: count,
  flushes: count,
  messages_in: count,
  emitted: count,
  late: count,
  errors: count,
  lag: count,
  last_cycle_at: z.string().nullable(),
  /** Event time: the newest watermark (epoch ms) a committed cycle wrote in the bucket; null in processing time and where it did not move. */
  watermark: z.number().nullable(),
});
export const historyStreamParams = z.object({ name: name255 });
export const historyStreamResponse = z.object({
  query_id: z.string(),
  name: z.string(),
  ...historyFrame,
  points: z.array(historyStreamPoint),
});
export type HistoryStream = z.infer<typeof historyStreamResponse>;

function route<const S extends RouteSpec>(spec: S): S {
  return spec;
}

export const historyRoutes = {
  historyOverview: route({
    method: 'GET',
    url: '/api/v1/history',
    level: 'read-only',
    summary: 'Every queue summed over time: pushed, popped, acked, failed, dead-lettered per bucket, total lag and DLQ size (range: 1h, 24h, 30d)',
    query: historyQuery,
    response: historyOverviewResponse,
  }),
  historyQueue: route({
    method: 'GET',
    url: '/api/v1/history/queues/:queue',
    level: 'read-only',
    summary: "One queue over time: its counts per bucket, depth and DLQ size, and each consumer group's pops, acks and lag (range: 1h, 24h, 30d)",
    params: historyQueueParams,
    query: historyQuery,
    response: historyQueueResponse,
  }),
  historyStream: route({
    method: 'GET',
    url: '/streams/v1/queries/:name/history',
    level: 'read-only',
    summary: 'One stream query over time: cycles, idle flushes, messages in, emits, late events, errors, last commit, lag and event-time watermark per bucket (range: 1h, 24h, 30d)',
    params: historyStreamParams,
    query: historyQuery,
    response: historyStreamResponse,
  }),
} satisfies Record<string, RouteSpec>;
