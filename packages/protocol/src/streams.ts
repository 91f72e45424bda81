import { z } from 'zod';
import { pushItem, pushResult } from './push.js';
import type { RouteSpec } from './routes.js';
import { listPageQuery, name255, queueName, uuid } from './values.js';
import { streamPlan, streamStages } from './stream-plan.js';
import { kvKey, kvNamespace, kvVersion } from './kv.js';

// Streams (PROTOCOL §7): register/list/drop a query, the cycle commit, the
// state read. Keys are snake_case on the wire (compat).

/** A stream state key: 1–1024 chars (the SDK escapes its own separators). */
export const stateKey = z
  .string()
  .min(1)
  .max(1024)
  .refine((s) => !s.includes('\u0000'), 'must not contain U+0000');

/**
 * A state row version as the client read it. Versions are JSON numbers on the
 * wire; a decimal string is accepted too (a client that kept it as text).
 */
export const stateVersion = z
  .union([z.number().int().min(0).max(Number.MAX_SAFE_INTEGER), z.string().regex(/^[0-9]{1,15}$/, 'must be a non-negative integer')])
  .transform(Number);

// ---- register / list / drop -------------------------------------------------

export const streamRegisterBody = z.object({
  name: name255,
  source_queue: queueName,
  sink_queue: queueName.nullable().optional(),
  config_hash: z.string().min(1).max(128),
  reset: z.boolean().default(false),
  /** Extension (issue 33): the chain's stages; with them a changed chain is compared stage by stage instead of refused. */
  stages: streamStages.optional(),
  /** Extension: consent to resume with the rows as they are when the plan says `keep-state`. */
  upgrade: z.enum(['keep-state']).optional(),
  /** Extension: names of the stages given a `migrateState`: their rows are rewritten once per partition before the new version runs. */
  migrate: z.array(z.string().min(1).max(200)).max(100).default([]),
  /** Extension: a key's state row not written for this many seconds is deleted by the maintenance pass (a gate's `stateTtlSeconds`); absent or null: never. */
  state_ttl_seconds: z.number().int().min(1).max(315_360_000).nullable().optional(),
});
export type StreamRegisterBody = z.infer<typeof streamRegisterBody>;

export const streamRegisterResponse = z.object({
  success: z.literal(true),
  query_id: z.string(),
  name: z.string(),
  config_hash: z.string(),
  fresh: z.boolean(),
  reset: z.boolean(),
  /** Extension: the plan the registration applied (absent on a fresh or legacy registration). */
  plan: streamPlan.optional(),
  /** Extension: partitions whose state a migration to this config_hash has not rewritten yet (runners migrate them before they run). */
  pending_migrations: z.array(z.string()).default([]),
  /** Extension: the registered version (a hash of the stages, code included), sent back on every cycle; null without stages. */
  version: z.string().nullable().default(null),
  /** Extension: the cycle route guards an idle flush by `flush_sources` (a join's); a runner expires a join's held records on the clock only where this is true. */
  flush_sources: z.boolean().default(false),
});

/** Plan a new version (issue 33): compare `stages` with the registered query's; nothing is changed. */
export const streamPlanBody = z.object({
  name: name255,
  config_hash: z.string().min(1).max(128),
  stages: streamStages,
  migrate: z.array(z.string().min(1).max(200)).max(100).default([]),
});
export type StreamPlanBody = z.infer<typeof streamPlanBody>;
export const streamPlanResponse = z.object({
  success: z.literal(true),
  query_id: z.string(),
  name: z.string(),
  registered_config_hash: z.string(),
  config_hash: z.string(),
  /** The query's live state rows. */
  state_rows: z.number().int(),
  plan: streamPlan,
});
export const streamPlanParams = z.object({ name: name255 });

/** Claim the migration of one partition's state (issue 33): one runner claims, the others wait until it is done. */
export const migrationClaimBody = z.object({
  query_id: uuid,
  partition_id: uuid,
  version: z.string().min(1).max(128),
  claim_id: uuid,
  /** How long the claim holds before another runner may take it over (a claimer that died). */
  lease_seconds: z.number().int().min(1).max(3600).default(30),
});
export const migrationClaimResponse = z.object({ success: z.literal(true), claimed: z.boolean(), done: z.boolean() });

/** Commit a claimed migration: the rewritten rows, under the partition lock, in one transaction, once. */
export const migrationCommitBody = z.object({
  query_id: uuid,
  partition_id: uuid,
  version: z.string().min(1).max(128),
  claim_id: uuid,
  state_ops: z.array(z.lazy(() => stateOp)).max(100000).default([]),
});
export type MigrationCommitBody = z.infer<typeof migrationCommitBody>;
export const migrationCommitResponse = z.object({ success: z.literal(true), state_ops_applied: z.number().int() });

export const streamQueryInfo = z.object({
  query_id: z.string(),
  name: z.string(),
  source_queue: z.string(),
  sink_queue: z.string().nullable(),
  config_hash: z.string(),
  created_at: z.string(),
  updated_at: z.string(),
  state_rows: z.number().int(),
});
export const streamListResponse = z.object({ queries: z.array(streamQueryInfo) });

export const streamDropBody = z.object({ name: name255 });
export const streamDropResponse = z.object({
  success: z.literal(true),
  query_id: z.string(),
  name: z.string(),
  state_rows_deleted: z.number().int(),
});

// ---- cycle ------------------------------------------------------------------

/**
 * upsert: insert or replace; delete: remove if present. `expected_version`
 * (absent row = 0) turns either into a compare-and-set; a mismatch fails the
 * element with VERSION_CONFLICT.
 */
export const stateOp = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('upsert'),
    key: stateKey,
    value: z.unknown().transform((v) => (v === undefined ? null : v)),
    expected_version: stateVersion.optional(),
  }),
  z.object({
    type: z.literal('delete'),
    key: stateKey,
    expected_version: stateVersion.optional(),
  }),
]);
export type StateOp = z.infer<typeof stateOp>;

export const cycleAckStatus = z.enum(['completed', 'success', 'failed', 'dlq']);

export const cycleAck = z.object({
  transactionId: name255,
  leaseId: uuid.optional(),
  status: cycleAckStatus.default('completed'),
  /** K: the ack must land on the K-th retained message after the cursor (§3.3 walk). */
  count: z.number().int().min(1).optional(),
  error: z.string().max(10000).optional(),
});
export type CycleAck = z.infer<typeof cycleAck>;

/**
 * Extension (joins): a source ack on a partition named by its id, not the
 * element's. A join's state lives on a shard of its own, and a cycle acks the
 * batch of either source queue (or both) with it, fenced by each one's lease.
 */
export const cycleSourceAck = cycleAck.omit({ count: true }).extend({ partition_id: uuid });
export type CycleSourceAck = z.infer<typeof cycleSourceAck>;

/**
 * Extension (lookups): a KV entry the cycle's outputs were computed from, with
 * the version read (0: absent). The cycle takes the KV's locks on these keys
 * (shared, rank 1, before its own) and commits only if every entry still has
 * that version: else the element answers VERSION_CONFLICT on `kv:<ns>/<key>`.
 */
export const cycleKvRead = z.object({ namespace: kvNamespace, key: kvKey, version: kvVersion });
export type CycleKvRead = z.infer<typeof cycleKvRead>;

// A cycle holds the rank-3 shard lock, so it may not take KV or timer locks
// (PROTOCOL §4): their presence is a 400, not an ignored field.
const forbidden = (what: string) =>
  z.never({ error: `a stream cycle carries no ${what} (lock order, PROTOCOL §4); use a transaction outside the stream` }).optional();

export const cycleBody = z.object({
  query_id: uuid,
  partition_id: uuid,
  consumer_group: name255.default('__QUEUE_MODE__'),
  state_ops: z.array(stateOp).max(10000).default([]),
  push_items: z.array(pushItem).max(10000).default([]),
  ack: cycleAck.nullable().default(null),
  release_lease: z.boolean().default(true),
  /** Extension (issue 33): the runner's version (register's answer); a cycle of another version than the registered one fails QUERY_VERSION_CHANGED. */
  version: z.string().min(1).max(128).optional(),
  /**
   * Extension. `counts`: answer `push_results: []` and only `push_counts`.
   * A runner pushing 500 outputs a cycle reads none of their 500 results;
   * building, sending and parsing them cost more than the counts it needs.
   * `duplicates`: the counts, and in `push_results` only the items answered
   * `duplicate` (each with its `index` in `push_items`): what a runner needs
   * to name an output that was already stored, for the price of none in the
   * usual cycle.
   */
  push_result_detail: z.enum(['items', 'counts', 'duplicates']).default('items'),
  /**
   * Extension, an idle flush's guard (epoch ms; ack must be null): the
   * element commits only if every message of the source partition stamped
   * (createdAt) before this instant is consumed by `consumer_group`, a push
   * still committing included, and the instant is not ahead of the broker's
   * clock. Else it answers `success:false, code:'FLUSH_DEFERRED'` and writes
   * nothing: a window ending by then may still get messages.
   */
  flush_before: z.number().int().min(0).max(8.64e15).optional(),
  /**
   * Extension: late events of this cycle's batch, as the runner counted them
   * (dropped, emitted alone or sent to a sink). The broker only adds it to
   * the query's history (`late`); it changes nothing the cycle writes.
   */
  late: z.number().int().min(0).max(1_000_000).optional(),
  /** Extension (joins): source acks on other partitions than `partition_id`, at most one per partition, committed with the rest. */
  source_acks: z.array(cycleSourceAck).min(1).max(2).optional(),
  /**
   * Extension (a join's idle flush): the source partitions, by queue and
   * partition name, that `flush_before` guards instead of `partition_id`
   * (a join's shard is no partition). One that does not exist has nothing
   * pending, once a transaction creating it has finished.
   */
  flush_sources: z.array(z.object({ queue: name255, partition: name255 })).min(1).max(2).optional(),
  /** Extension (lookups): KV entries read for this cycle's outputs, checked (and locked shared) in its transaction. */
  kv_reads: z.array(cycleKvRead).max(10000).optional(),
  kv: forbidden('kv'),
  timers: forbidden('timers'),
})
  .refine((b) => b.flush_before === undefined || (b.ack === null && b.source_acks === undefined), { path: ['flush_before'], message: 'only on an idle flush (ack: null, no source_acks)' })
  .refine((b) => b.flush_sources === undefined || b.flush_before !== undefined, { path: ['flush_sources'], message: 'only with flush_before' })
  .refine((b) => !b.source_acks || new Set([b.partition_id, ...b.source_acks.map((a) => a.partition_id)]).size === b.source_acks.length + 1, {
    path: ['source_acks'],
    message: 'each source ack names a partition of its own, other than partition_id',
  });
export type CycleBody = z.infer<typeof cycleBody>;

export const stateResult = z.object({
  key: z.string(),
  type: z.enum(['upsert', 'delete']),
  version: z.number().int().nullable(),
});

export const cycleAckResult = z.object({
  success: z.literal(true),
  count: z.number().int(),
  lease_released: z.boolean(),
  dlq: z.boolean(),
  offset: z.string(),
});

export const cycleResponse = z.object({
  success: z.boolean(),
  query_id: z.string(),
  partition_id: z.string(),
  queueName: z.string().nullable(),
  state_ops_applied: z.number().int(),
  state_results: z.array(stateResult),
  push_results: z.array(pushResult),
  /** Extension: how many sink pushes were stored and how many were duplicates. */
  push_counts: z.object({ queued: z.number().int(), duplicate: z.number().int() }).optional(),
  ack_result: cycleAckResult.nullable(),
  /** Extension (joins): one result per `source_acks` entry, in order, with its queue's name. */
  source_ack_results: z.array(cycleAckResult.extend({ partition_id: z.string(), queueName: z.string().nullable() })).optional(),
  error: z.string().optional(),
  code: z.string().optional(),
  /** With VERSION_CONFLICT: the key that conflicted and its current version (0 = absent). */
  key: z.string().optional(),
  currentVersion: z.number().int().optional(),
  /**
   * With QUEUE_FULL: the sink queue whose maxSize left no room for this
   * cycle's items to it, its pending messages and maxSize, and the items
   * (`count`). Nothing of the cycle was committed: state, pushes and the
   * source ack wait for a later try (the runner backs off, `retryAfter` s).
   */
  queue: z.string().optional(),
  pending: z.number().int().optional(),
  maxSize: z.number().int().optional(),
  count: z.number().int().optional(),
  retryAfter: z.number().int().optional(),
});
export type CycleResult = z.infer<typeof cycleResponse>;

/** The state row where a runner keeps a partition's event-time watermark (`{eventTimeMs}`); the broker reads it for the console and the history. */
export const WATERMARK_STATE_KEY = '__wm__';

/**
 * Whether a state key (PROTOCOL §7.6) is the runner's bookkeeping rather than
 * state a person reads: the event-time watermark `__wm__`, a window
 * operator's close horizon `<tag>␟__closed__`, a join's clock row `__join__`.
 * Views of a query's state (the test kit, the CLI) show these on request only.
 */
export function isBookkeepingStateKey(key: string): boolean {
  return key === WATERMARK_STATE_KEY || key === '__join__' || key.endsWith('\u001f__closed__');
}

// ---- state read ---------------------------------------------------------------

export const stateGetBody = z.object({
  query_id: uuid,
  partition_id: uuid,
  keys: z.array(stateKey).max(1000).optional(),
  /** Literal prefix: `%`, `_` and `\` have no wildcard meaning. */
  key_prefix: z.string().max(1024).refine((s) => !s.includes('\u0000'), 'must not contain U+0000').optional(),
  /** Rows whose `value.windowEnd` is a JSON number ≤ this (epoch ms). */
  ripe_at_or_before: z.number().finite().optional(),
  /** Page size: at most this many rows (default and maximum STATE_GET_MAX_ROWS). */
  limit: z.number().int().min(1).max(10000).optional(),
  /** Page cursor: only keys bytewise after this one (the previous page's `next_after`). */
  after: z.string().max(2048).refine((s) => !s.includes('\u0000'), 'must not contain U+0000').optional(),
});
/** Rows one state/get answers at most; a longer result is paged with `after`. */
export const STATE_GET_MAX_ROWS = 10000;
export type StateGetBody = z.infer<typeof stateGetBody>;

export const stateRow = z.object({
  key: z.string(),
  value: z.unknown(),
  version: z.number().int(),
  updated_at: z.string(),
});
/** `next_after`: set when more rows match (pass it as `after`), null on the last page. */
export const stateGetResponse = z.object({ success: z.literal(true), rows: z.array(stateRow), next_after: z.string().nullable() });

function route<const S extends RouteSpec>(spec: S): S {
  return spec;
}

export const streamRoutes = {
  streamsRegister: route({
    method: 'POST',
    url: '/streams/v1/queries',
    level: 'read-write',
    summary: 'Register a stream query (or refresh it; reset wipes its state)',
    body: streamRegisterBody,
    response: streamRegisterResponse,
  }),
  streamsList: route({ method: 'GET', url: '/streams/v1/queries', level: 'read-only', summary: 'List stream queries with their state row counts (paged by name: limit, offset)', query: listPageQuery, response: streamListResponse }),
  streamsDrop: route({
    method: 'POST',
    url: '/streams/v1/queries/drop',
    level: 'admin',
    summary: 'Drop a stream query and its state; waits for in-flight cycles',
    body: streamDropBody,
    response: streamDropResponse,
  }),
  streamsPlan: route({
    method: 'POST',
    url: '/streams/v1/queries/plan',
    level: 'read-write',
    summary: 'Compare a new version of a stream query with the registered one, stage by stage; records it as the proposed version',
    body: streamPlanBody,
    response: streamPlanResponse,
  }),
  streamsPlanShow: route({
    method: 'GET',
    url: '/streams/v1/queries/:name/plan',
    level: 'read-only',
    summary: 'The plan of the last version proposed for a stream query (by plan, or a run that was refused)',
    params: streamPlanParams,
    response: streamPlanResponse,
  }),
  streamsMigrationClaim: route({
    method: 'POST',
    url: '/streams/v1/migrations/claim',
    level: 'read-write',
    summary: "Claim the migration of one partition's state to a new version of a query",
    body: migrationClaimBody,
    response: migrationClaimResponse,
  }),
  streamsMigrationCommit: route({
    method: 'POST',
    url: '/streams/v1/migrations/commit',
    level: 'read-write',
    summary: "Commit a claimed migration: the rewritten rows in one transaction under the partition lock, once",
    body: migrationCommitBody,
    response: migrationCommitResponse,
  }),
  streamsCycle: route({
    method: 'POST',
    url: '/streams/v1/cycle',
    level: 'read-write',
    summary: 'Commit one stream cycle: state ops, sink pushes and the source ack in one transaction',
    body: cycleBody,
    response: cycleResponse,
  }),
  streamsStateGet: route({
    method: 'POST',
    url: '/streams/v1/state/get',
    level: 'read-only',
    summary: 'Read the state rows of a (query, partition) by keys, literal prefix or ripeness',
    body: stateGetBody,
    response: stateGetResponse,
  }),
} satisfies Record<string, RouteSpec>;
