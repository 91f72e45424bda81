import { z } from 'zod';
import { ackStatus } from './ack.js';
import { pushItem } from './push.js';
import type { RouteSpec } from './routes.js';
import { isoTime, listSearchQuery, name255, offset, queryBool, queryInt, queueName, uuid } from './values.js';

// Schemas of the administrative and semantic routes (PROTOCOL §5.1, §5.2
// delete, §5.7, §5.8, §5.9, §5.10): configure, queue delete, consumer groups,
// seek, DLQ, transactions and maintenance.

const INT_MAX = 2147483647;
const seconds = z.number().int().min(0).max(INT_MAX);

/** Queue options with their defaults (PROTOCOL §5.1). Every option is echoed by configure. */
export const queueOptionDefaults = {
  leaseTime: 300,
  retryLimit: 3,
  delayedProcessing: 0,
  windowBuffer: 0,
  retentionEnabled: false,
  retentionSeconds: 0,
  completedRetentionSeconds: 0,
  maxWaitTimeSeconds: 0,
  leaseExpiryCountsAsFailure: false,
  encryptionEnabled: false,
  retryDelay: 1000,
  retryBackoff: 'fixed',
  retryDelayMax: 0,
  ttl: 3600,
  maxSize: 0,
  priority: 0,
  deadLetterQueue: false,
  dlqAfterMaxRetries: false,
  claimOrder: 'fair',
  partitionWeights: {} as Record<string, number>,
  conflatedGroups: [] as string[],
} as const;
export type QueueOptions = {
  -readonly [K in keyof typeof queueOptionDefaults]: K extends 'claimOrder'
    ? ClaimOrder
    : K extends 'partitionWeights'
      ? Record<string, number>
      : K extends 'conflatedGroups'
        ? string[]
        : (typeof queueOptionDefaults)[K] extends boolean
          ? boolean
          : (typeof queueOptionDefaults)[K] extends string
            ? RetryBackoff
            : number;
};

/**
 * Which pending partition a pop of the whole queue serves first: `fair`, in
 * turn (each partition's turn, then the next, weighted by partitionWeights),
 * or `oldest`, the partition holding the oldest pending message (Queen v1's order).
 */
export const claimOrder = z.enum(['fair', 'oldest']);
export type ClaimOrder = z.infer<typeof claimOrder>;

/** A partition name prefix and its weight in fair pops: up to 100 prefixes, weights 1–1000. */
const partitionWeights = z
  .record(name255, z.number().int().min(1).max(1000))
  .refine((w) => Object.keys(w).length <= 100, 'at most 100 prefixes');

/** How the retry delay grows per failure of the head message (PROTOCOL §3.5). */
export const retryBackoff = z.enum(['fixed', 'exponential']);
export type RetryBackoff = z.infer<typeof retryBackoff>;

/**
 * Options stored only when set: retryDelay is applied only when a queue sets
 * it (Queen stores a default of 1000 and never applies it; we echo that
 * default and keep redelivering at once).
 */
export const optionsStoredWhenSet = ['retryDelay'] as const;

/** Each option: omitted keeps its value, `null` resets it to the default (merge, fix). */
export const queueOptionsPatch = z.object({
  leaseTime: seconds.nullable().optional(),
  retryLimit: seconds.nullable().optional(),
  delayedProcessing: seconds.nullable().optional(),
  windowBuffer: seconds.nullable().optional(),
  retentionEnabled: z.boolean().nullable().optional(),
  retentionSeconds: seconds.nullable().optional(),
  completedRetentionSeconds: seconds.nullable().optional(),
  maxWaitTimeSeconds: seconds.nullable().optional(),
  leaseExpiryCountsAsFailure: z.boolean().nullable().optional(),
  encryptionEnabled: z.boolean().nullable().optional(),
  /** Milliseconds a failed message waits before its group sees it again; applied only when set. */
  retryDelay: seconds.nullable().optional(),
  retryBackoff: retryBackoff.nullable().optional(),
  /** Milliseconds that bound the retry delay (0: no bound). */
  retryDelayMax: seconds.nullable().optional(),
  ttl: seconds.nullable().optional(),
  maxSize: seconds.nullable().optional(),
  priority: z.number().int().min(-INT_MAX).max(INT_MAX).nullable().optional(),
  deadLetterQueue: z.boolean().nullable().optional(),
  dlqAfterMaxRetries: z.boolean().nullable().optional(),
  /** `fair` (default) or `oldest`: the order of a pop of the whole queue. */
  claimOrder: claimOrder.nullable().optional(),
  /** Partition name prefix → weight (1–1000): under contention a fair pop serves a partition in proportion to the weight of the longest prefix its name starts with (1 without one). */
  partitionWeights: partitionWeights.nullable().optional(),
  /** Consumer groups (`__QUEUE_MODE__` for queue mode) that get only the newest message of each partition they pop; acking it consumes everything behind it. */
  conflatedGroups: z.array(name255).max(100).nullable().optional(),
});
export type QueueOptionsPatch = z.infer<typeof queueOptionsPatch>;

export const configureBody = z.object({
  queue: queueName,
  namespace: name255.nullable().optional(),
  task: name255.nullable().optional(),
  options: queueOptionsPatch.optional(),
});
export type ConfigureBody = z.infer<typeof configureBody>;

export const configureResponse = z.object({
  configured: z.literal(true),
  queueId: z.string(),
  partitionId: z.string(),
  queue: z.string(),
  namespace: z.string().nullable(),
  task: z.string().nullable(),
  options: z.record(z.string(), z.unknown()),
});

export const queueDeleteResponse = z.object({ deleted: z.literal(true), queue: z.string(), existed: z.boolean() });

// ---- consumer groups (§5.9) ----

export const adminQueueParams = z.object({ queue: queueName });
export const adminGroupParams = z.object({ group: name255 });
export const groupQueueParams = z.object({ group: name255, queue: queueName });
export const groupPartitionParams = z.object({ group: name255, queue: queueName, partition: name255 });

export const groupDeleteQuery = z.object({ deleteMetadata: queryBool.optional() });
export const groupDeleteResponse = z.object({
  success: z.literal(true),
  consumerGroup: z.string(),
  deletedPartitions: z.number().int(),
  metadataDeleted: z.boolean(),
});

/**
 * Stable; Lagging when the oldest message not yet acked is at least 60 s
 * old; Dead when there is lag and nothing was acked for an hour.
 */
export const groupState = z.enum(['Stable', 'Lagging', 'Dead']);
export const groupSummary = z.object({
  name: z.string(),
  topics: z.array(z.string()),
  /** Per queue the group reads: that queue's own lag, time lag (s), live leases and state. */
  queues: z.array(z.object({ queue: z.string(), lag: z.number().int(), maxTimeLag: z.number().int(), members: z.number().int(), state: groupState })),
  members: z.number().int(),
  totalLag: z.number().int(),
  partitionsWithLag: z.number().int(),
  maxTimeLag: z.number().int(),
  /** The whole group's state, over all its queues (a queue's own is in `queues`). */
  state: groupState,
});
export const groupListResponse = z.array(groupSummary);

/** Exactly one of `toEnd:true` or `timestamp`. */
export const queueSeekBody = z
  .object({ toEnd: z.literal(true).optional(), timestamp: isoTime.optional() })
  .superRefine((b, ctx) => {
    if ((b.toEnd === undefined) === (b.timestamp === undefined)) {
      ctx.addIssue({ code: 'custom', path: [], message: 'must carry exactly one of toEnd:true or timestamp' });
    }
  });
export type QueueSeekBody = z.infer<typeof queueSeekBody>;
export const queueSeekResponse = z.object({
  success: z.literal(true),
  consumerGroup: z.string(),
  queueName: z.string(),
  seekToEnd: z.boolean(),
  targetTimestamp: z.string().nullable(),
  partitionsUpdated: z.number().int(),
});

/** `{}` = to the end (compat); `{offset}` or `{timestamp}` (extension), never both. */
export const partitionSeekBody = z
  .object({ offset: offset.optional(), timestamp: isoTime.optional() })
  .superRefine((b, ctx) => {
    if (b.offset !== undefined && b.timestamp !== undefined) {
      ctx.addIssue({ code: 'custom', path: [], message: 'must carry at most one of offset or timestamp' });
    }
  });
export type PartitionSeekBody = z.infer<typeof partitionSeekBody>;
export const partitionSeekResponse = z.object({ success: z.literal(true), updated: z.literal(true), cursorMovedTo: z.string() });

// ---- DLQ (§5.8) ----

export const dlqQuery = z.object({
  queue: queueName.optional(),
  consumerGroup: name255.optional(),
  partition: name255.optional(),
  limit: queryInt(1, 1000).default(100),
  offset: queryInt(0, INT_MAX).default(0),
});
export type DlqQuery = z.infer<typeof dlqQuery>;
export const dlqMessage = z.object({
  id: z.string(),
  transactionId: z.string(),
  partitionId: z.string(),
  queue: z.string(),
  partition: z.string(),
  consumerGroup: z.string(),
  errorMessage: z.string().nullable(),
  retryCount: z.number().int(),
  data: z.unknown(),
  producerSub: z.string().nullable(),
  createdAt: z.string(),
  failedAt: z.string(),
  offset: z.string(),
});
export const dlqResponse = z.object({
  messages: z.array(dlqMessage),
  pagination: z.object({ limit: z.number().int(), offset: z.number().int() }),
  total: z.number().int(),
});

/**
 * DLQ delete (extension): the entries named by message `id` (as GET
 * /api/v1/dlq lists them), of every group or only of `consumerGroup`.
 */
export const dlqIdsBody = z.object({
  ids: z.array(uuid).min(1).max(1000),
  consumerGroup: name255.optional(),
});
export type DlqIdsBody = z.infer<typeof dlqIdsBody>;

/** Most DLQ entries one bulk requeue moves (its page); the default page is 100. */
export const DLQ_REQUEUE_MAX_PAGE = 1000;

/**
 * DLQ requeue (extension): the messages of the entries named by `ids` (as
 * GET /api/v1/dlq lists them), or in bulk the entries matching the filters
 * (`queue`, `consumerGroup`, `partition`, `errorContains`, `failedAfter`,
 * `failedBefore`), oldest failure first, at most `limit` per request: call
 * again while `remaining` > 0. `consumerGroup` narrows either form to that
 * group's entries. `targetQueue` (and `targetPartition`, default the
 * message's own partition name) replays into another queue instead of the
 * message's own partition.
 */
export const dlqRequeueBody = z
  .object({
    ids: z.array(uuid).min(1).max(1000).optional(),
    consumerGroup: name255.optional(),
    queue: queueName.optional(),
    partition: name255.optional(),
    /** Entries whose error message contains this text (case-insensitive). */
    errorContains: z.string().min(1).max(1000).optional(),
    /** Entries that failed at or after this time. */
    failedAfter: isoTime.optional(),
    /** Entries that failed before this time (a replay pins it when it starts, so what fails again meanwhile is not replayed again). */
    failedBefore: isoTime.optional(),
    limit: z.number().int().min(1).max(DLQ_REQUEUE_MAX_PAGE).default(100),
    targetQueue: queueName.optional(),
    targetPartition: name255.optional(),
  })
  .superRefine((b, ctx) => {
    const filters = (['queue', 'partition', 'errorContains', 'failedAfter', 'failedBefore'] as const).filter((f) => b[f] !== undefined);
    if (b.ids !== undefined && filters.length > 0) {
      for (const f of filters) ctx.addIssue({ code: 'custom', path: [f], message: 'is a bulk filter: name ids or filters, not both' });
    }
    if (b.ids === undefined && filters.length === 0 && b.consumerGroup === undefined) {
      ctx.addIssue({ code: 'custom', path: ['ids'], message: 'name the entries: ids, or at least one filter (queue, consumerGroup, partition, errorContains, failedAfter, failedBefore)' });
    }
    if (b.targetPartition !== undefined && b.targetQueue === undefined) {
      ctx.addIssue({ code: 'custom', path: ['targetPartition'], message: 'needs targetQueue' });
    }
  });
export type DlqRequeueBody = z.infer<typeof dlqRequeueBody>;

/**
 * One message of a requeue, in input order (by ids) or oldest failure first
 * (bulk). `success:false, code:"MESSAGE_NOT_FOUND"`: no DLQ entry matched the
 * id (never there, or already requeued or deleted); `code:"QUEUE_FULL"`: the
 * destination queue had no room under its maxSize, and the entries stay.
 */
export const dlqRequeueResult = z.object({
  index: z.number().int(),
  id: z.string(),
  success: z.boolean(),
  code: z.string().nullable(),
  error: z.string().nullable(),
  /** Where the message was pushed: its own partition, or the target's. */
  queue: z.string().nullable(),
  partition: z.string().nullable(),
  partitionId: z.string().nullable(),
  /** DLQ entries removed (one per consumer group that dead-lettered the message). */
  entriesDeleted: z.number().int(),
  /** The re-pushed message: a new id and offset at the partition's head. */
  messageId: z.string().nullable(),
  offset: z.string().nullable(),
  /**
   * `dlq:<id>`, the re-pushed message's transactionId: a replay of the same
   * message into the same partition while the first copy is retained answers
   * `duplicate` (the copy's messageId and offset) instead of queueing it twice.
   */
  transactionId: z.string().nullable(),
  status: z.enum(['queued', 'duplicate']).nullable(),
});
export const dlqRequeueResponse = z.object({
  success: z.literal(true),
  /** Messages re-pushed (queued or duplicate) by this request. */
  requeued: z.number().int(),
  /** Messages not re-pushed because their destination queue was at its maxSize: their entries stay in the DLQ (results say QUEUE_FULL). */
  refused: z.number().int().optional(),
  results: z.array(dlqRequeueResult),
  /** Bulk only: matching entries still in the DLQ after this request (call again while > 0). */
  remaining: z.number().int().optional(),
});
export const dlqDeleteResponse = z.object({
  success: z.literal(true),
  deleted: z.number().int(),
  results: z.array(z.object({ index: z.number().int(), id: z.string(), success: z.boolean(), code: z.string().nullable(), entriesDeleted: z.number().int() })),
});

// ---- transactions (§5.7) ----

export const txnPushOp = z.object({ type: z.literal('push'), items: z.array(pushItem).min(1) });
export const txnAckOp = z.object({
  type: z.literal('ack'),
  transactionId: name255,
  partitionId: uuid,
  status: ackStatus.default('completed'),
  consumerGroup: name255.default('__QUEUE_MODE__'),
  leaseId: uuid.optional(),
  error: z.string().max(10000).optional(),
});
export type TxnPushOp = z.infer<typeof txnPushOp>;
export type TxnAckOp = z.infer<typeof txnAckOp>;

const kvNamespace = z.string().regex(/^[A-Za-z0-9._:-]{1,128}$/, 'must match [A-Za-z0-9._:-]{1,128}');
const kvKey = z
  .string()
  .min(1)
  .max(512)
  .refine((s) => !/[\u0000-\u001f\u007f]/.test(s), 'must not contain control characters');
const ttlSeconds = z.number().int().min(1).max(31536000);
const safeInt = z.number().int().min(-Number.MAX_SAFE_INTEGER).max(Number.MAX_SAFE_INTEGER);

export const txnKvOp = z.discriminatedUnion('op', [
  z.object({
    op: z.literal('set'),
    namespace: kvNamespace,
    key: kvKey,
    value: z.unknown().refine((v) => v !== undefined, 'is required'),
    ttlSeconds: ttlSeconds.optional(),
    expectedVersion: z.number().int().min(0).optional(),
  }),
  z.object({
    op: z.literal('incr'),
    namespace: kvNamespace,
    key: kvKey,
    by: safeInt.default(1),
    max: safeInt.optional(),
    ttlSeconds: ttlSeconds.optional(),
    requireApplied: z.boolean().default(false),
  }),
  z.object({ op: z.literal('delete'), namespace: kvNamespace, key: kvKey, expectedVersion: z.number().int().min(0).optional() }),
]);
export type TxnKvOp = z.infer<typeof txnKvOp>;

export const txnTimer = z
  .object({
    queue: queueName,
    partition: name255.default('Default'),
    payload: z.unknown().optional().transform((v) => (v === undefined ? null : v)),
    fireAt: isoTime.optional(),
    delayMs: z.number().int().min(0).max(31536000000).optional(),
    transactionId: name255.optional(),
  })
  .superRefine((t, ctx) => {
    if ((t.fireAt === undefined) === (t.delayMs === undefined)) {
      ctx.addIssue({ code: 'custom', path: [], message: 'must carry exactly one of fireAt or delayMs' });
    } else if (t.fireAt !== undefined && Date.parse(t.fireAt) > Date.now() + 366 * 86400_000) {
      ctx.addIssue({ code: 'custom', path: ['fireAt'], message: 'must be at most one year ahead' });
    }
  });
export type TxnTimer = z.infer<typeof txnTimer>;

/**
 * Caps of one transaction (PROTOCOL §5.7): everything it touches is locked
 * until it commits, so an unbounded array could exhaust PostgreSQL's lock
 * table for every session. Push items in total are capped by the broker's
 * QUEEN_MAX_PUSH_ITEMS.
 */
export const TXN_MAX_KV = 1000;
export const TXN_MAX_TIMERS = 1000;
export const TXN_MAX_ACKS = 10000;

export const transactionBody = z
  .object({
    operations: z.array(z.discriminatedUnion('type', [txnPushOp, txnAckOp])).optional(),
    requiredLeases: z.array(z.unknown()).optional(),
    kv: z.array(txnKvOp).max(TXN_MAX_KV).optional(),
    timers: z.array(txnTimer).max(TXN_MAX_TIMERS).optional(),
  })
  .superRefine((b, ctx) => {
    if (!b.operations?.length && !b.kv?.length && !b.timers?.length) {
      ctx.addIssue({ code: 'custom', path: ['operations'], message: 'at least one of operations, kv or timers must be non-empty' });
    }
    const acks = b.operations?.filter((op) => op.type === 'ack').length ?? 0;
    if (acks > TXN_MAX_ACKS) {
      ctx.addIssue({ code: 'custom', path: ['operations'], message: `must hold at most ${TXN_MAX_ACKS} ack operations (got ${acks})` });
    }
  });
export type TransactionBody = z.infer<typeof transactionBody>;

/** One push of a committed transaction, as `results[i]` answers it. */
export const transactionPushResult = z.object({
  index: z.number().int(),
  type: z.literal('push'),
  success: z.literal(true),
  status: z.enum(['queued', 'duplicate']),
  transactionId: z.string(),
  messageId: z.string(),
  partitionId: z.string(),
  queueName: z.string(),
  offset: z.string(),
});
export type TransactionPushResult = z.infer<typeof transactionPushResult>;

/** One ack of a committed transaction, as `results[i]` answers it. */
export const transactionAckResult = z.object({
  index: z.number().int(),
  type: z.literal('ack'),
  success: z.literal(true),
  transactionId: z.string(),
  error: z.null(),
  dlq: z.boolean(),
});
export type TransactionAckResult = z.infer<typeof transactionAckResult>;

export const transactionResponse = z.object({
  transactionId: z.string(),
  success: z.boolean(),
  results: z.array(z.record(z.string(), z.unknown())),
  kvResults: z.array(z.record(z.string(), z.unknown())).optional(),
  timerResults: z.array(z.record(z.string(), z.unknown())).optional(),
  error: z.string().optional(),
  code: z.string().optional(),
});

// ---- maintenance (§5.10) ----

export const maintenanceStatusResponse = z.object({ maintenanceMode: z.boolean(), popMaintenanceMode: z.boolean() });
export const maintenancePopBody = z.object({ enabled: z.boolean() });
export const maintenancePopResponse = z.object({ popMaintenanceMode: z.boolean() });
export const maintenanceTask = z.enum(['retention', 'partitions', 'kv', 'timers', 'state', 'history']);
export type MaintenanceTask = z.infer<typeof maintenanceTask>;
export const maintenanceRunBody = z.object({ tasks: z.array(maintenanceTask).optional() });
export const maintenanceRunResponse = z.object({
  success: z.literal(true),
  retention: z.object({ segmentsDropped: z.number().int(), messagesDropped: z.number().int() }),
  partitions: z.object({ deleted: z.number().int(), vetoed: z.number().int() }),
  kv: z.object({ expiredPurged: z.number().int() }),
  timers: z.object({ fired: z.number().int() }),
  /** Stream state rows deleted because their query's `state_ttl_seconds` passed since they were last written. */
  state: z.object({ expiredDeleted: z.number().int() }),
  /** History rows (console charts, `queen stats`) past their retention: minute buckets after QUEEN_HISTORY_MINUTES_KEPT_H, hour buckets after QUEEN_HISTORY_HOURS_KEPT_D. */
  history: z.object({ rowsDeleted: z.number().int() }),
});
export type MaintenanceRunResult = z.infer<typeof maintenanceRunResponse>;

function route<const S extends RouteSpec>(spec: S): S {
  return spec;
}

export const adminRoutes = {
  configure: route({ method: 'POST', url: '/api/v1/configure', level: 'read-write', summary: 'Create or configure a queue (options merge)', body: configureBody, response: configureResponse }),
  queueDelete: route({ method: 'DELETE', url: '/api/v1/resources/queues/:queue', level: 'admin', summary: 'Delete a queue and everything it holds', params: adminQueueParams, response: queueDeleteResponse }),
  groupList: route({ method: 'GET', url: '/api/v1/consumer-groups', level: 'read-only', summary: 'Consumer groups with lag and state (paged by name: limit, offset; search by name)', query: listSearchQuery, response: groupListResponse }),
  groupDelete: route({ method: 'DELETE', url: '/api/v1/consumer-groups/:group', level: 'admin', summary: 'Delete a consumer group on every queue', params: adminGroupParams, query: groupDeleteQuery, response: groupDeleteResponse }),
  groupQueueDelete: route({ method: 'DELETE', url: '/api/v1/consumer-groups/:group/queues/:queue', level: 'admin', summary: 'Delete a consumer group on one queue', params: groupQueueParams, query: groupDeleteQuery, response: groupDeleteResponse }),
  seekQueue: route({ method: 'POST', url: '/api/v1/consumer-groups/:group/queues/:queue/seek', level: 'read-write', summary: 'Move the group cursor of every partition of a queue', params: groupQueueParams, body: queueSeekBody, response: queueSeekResponse }),
  seekPartition: route({ method: 'POST', url: '/api/v1/consumer-groups/:group/queues/:queue/partitions/:partition/seek', level: 'read-write', summary: 'Move the group cursor of one partition', params: groupPartitionParams, body: partitionSeekBody, response: partitionSeekResponse }),
  dlq: route({ method: 'GET', url: '/api/v1/dlq', level: 'read-only', summary: 'Dead-lettered messages, newest failure first', query: dlqQuery, response: dlqResponse }),
  dlqRequeue: route({ method: 'POST', url: '/api/v1/dlq/requeue', level: 'admin', summary: 'Re-push dead-lettered messages (by id, or in bulk by filters, paged) to their partitions or another queue, and remove their DLQ entries', body: dlqRequeueBody, response: dlqRequeueResponse }),
  dlqDelete: route({ method: 'POST', url: '/api/v1/dlq/delete', level: 'admin', summary: 'Remove DLQ entries (the messages stay in the log)', body: dlqIdsBody, response: dlqDeleteResponse }),
  transaction: route({ method: 'POST', url: '/api/v1/transaction', level: 'read-write', summary: 'Pushes and acks (and kv, timers) in one PostgreSQL transaction', body: transactionBody, response: transactionResponse }),
  maintenanceGet: route({ method: 'GET', url: '/api/v1/system/maintenance', level: 'admin', summary: 'Maintenance flags', response: maintenanceStatusResponse }),
  maintenancePop: route({ method: 'POST', url: '/api/v1/system/maintenance/pop', level: 'admin', summary: 'Pause or resume every pop, cluster-wide', body: maintenancePopBody, response: maintenancePopResponse }),
  maintenanceRun: route({ method: 'POST', url: '/api/v1/system/maintenance/run', level: 'admin', summary: 'Run one maintenance pass now', body: maintenanceRunBody, response: maintenanceRunResponse }),
} satisfies Record<string, RouteSpec>;
