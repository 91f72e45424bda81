import type { FastifyInstance } from 'fastify';
import type pg from 'pg';
import { pushResultOf, QueenError, routes, type PushItem, type PushResult } from '@queen-mq/protocol';
import type { BrokerContext } from '../context/context.js';
import type { NamedStatement } from '../db/database.js';
import { encryptedQueues, encryptPayload, queueMaxSizes } from './encryption.js';
import { registerRoute } from '../http/http.js';
import { tally } from '../metrics/metrics.js';
import { PUSH_RUN_SQL, type AllocatorItem, type AllocatorResult } from '../sql/queen.log_append_v1.js';
import { PUSH_MANY_SQL } from '../sql/queen.log_push_many_v1.js';

/**
 * Items as the allocator takes them: their partitions ensured (created by a
 * short transaction of their own when missing, PROTOCOL §4) and the payloads
 * of encrypted queues encrypted. Shared by push, transaction and cycle sink
 * pushes, the one write path.
 */
export async function allocatorItems(
  ctx: BrokerContext,
  items: readonly { queue: string; partition: string; payload?: unknown; transactionId?: string; traceId?: string; traceparent?: string }[],
): Promise<AllocatorItem[]> {
  const dir = await ctx.partitions.ensure(items.map((i) => ({ queue: i.queue, partition: i.partition })));
  const encrypted = await encryptedQueues(ctx, items.map((i) => i.queue));
  return items.map((i) => ({
    partition_id: ctx.partitions.idOf(dir, i.queue, i.partition),
    ...(encrypted.has(i.queue) ? { encrypted: encryptPayload(ctx, i.payload) } : { payload: i.payload }),
    transaction_id: i.transactionId,
    trace_id: i.traceId,
    traceparent: i.traceparent,
  }));
}

/** A push into queues with a maxSize: the check and the append in one statement (queen.log_push_capped_v1.sql). */
const PUSH_CAPPED_SQL: NamedStatement = { name: 'queen_push_capped', text: 'select * from queen.log_push_capped_v1($1::jsonb, $2, $3::jsonb)' };
/** The room check alone, inside a caller's transaction before its appends (queen.log_queue_first_full_v1.sql). */
const FIRST_FULL_SQL: NamedStatement = { name: 'queen_first_full', text: 'select * from queen.log_queue_first_full_v1($1::jsonb)' };

/** Seconds a 429 QUEUE_FULL asks the producer to wait (Retry-After, and `retryAfter` in the body). */
const QUEUE_FULL_RETRY_AFTER_S = 1;

/** The items per queue of `items` that go to a queue of `bounded`, as the room check takes them. */
export function boundedCounts(items: readonly { queue: string }[], bounded: ReadonlyMap<string, number>): Map<string, number> {
  const counts = new Map<string, number>();
  for (const i of items) if (bounded.has(i.queue)) tally(counts, i.queue);
  return counts;
}

/** QUEUE_FULL (429) for `queue`, logged; the answer carries the numbers and `retryAfter`. */
function queueFull(ctx: BrokerContext, queue: string, pending: number, maxSize: number, count: number | undefined, path: string): QueenError {
  const params = { queue, pending, maxSize, count };
  ctx.log.warn({ ...params, path }, 'write refused: queue full');
  return new QueenError('QUEUE_FULL', undefined, { params, extra: { ...params, retryAfter: QUEUE_FULL_RETRY_AFTER_S } });
}

/**
 * The room check of a write that appends in a transaction of its own making
 * (the transaction route): on `client`, after any KV or timer lock and before
 * the first append lock, it locks the bounded queues of `counts` and throws
 * QUEUE_FULL when one has no room for its items; the caller's transaction
 * then rolls back whole.
 */
export async function assertRoom(ctx: BrokerContext, client: Pick<pg.PoolClient, 'query'>, counts: Map<string, number>, path: string): Promise<void> {
  if (counts.size === 0) return;
  const { rows } = await client.query<{ queue: string; max_size: string; pending: string; count: string }>({
    ...FIRST_FULL_SQL,
    values: [JSON.stringify([...counts].map(([queue, count]) => ({ queue, count })))],
  });
  const full = rows[0];
  if (full) throw queueFull(ctx, full.queue, Number(full.pending), Number(full.max_size), Number(full.count), path);
}

/**
 * Appends items to queues of which some have a maxSize (`bounded`: queue →
 * maxSize as cached). Throws QUEUE_FULL (429) when a queue has no room for
 * its items; then nothing of the request was stored.
 */
async function appendCapped(ctx: BrokerContext, items: PushItem[], rows: AllocatorItem[], producerSub: string | null, bounded: Map<string, number>): Promise<AllocatorResult[]> {
  const counts = boundedCounts(items, bounded);
  const { rows: results } = await ctx.db.query<AllocatorResult & { full_queue: string | null; max_size: string | null; pending: string | null }>(PUSH_CAPPED_SQL, [
    JSON.stringify(rows),
    producerSub,
    JSON.stringify([...counts].map(([queue, count]) => ({ queue, count }))),
  ]);
  const full = results[0]?.full_queue;
  if (full) throw queueFull(ctx, full, Number(results[0]!.pending), Number(results[0]!.max_size), counts.get(full), 'push');
  return results;
}

/**
 * Appends items in one PostgreSQL transaction (all or none): partitions are
 * ensured first, then queen.log_push_many_v1 takes the append locks in
 * ascending partition id order and allocates offsets in item order (one
 * partition's items go to its allocator directly: appendStatement).
 */
async function pushItems(ctx: BrokerContext, items: PushItem[], producerSub: string | null): Promise<PushResult[]> {
  if (items.length === 0) return [];
  return ctx.partitions.retrying(async () => {
    const rows = await allocatorItems(ctx, items);
    // Read from the cache allocatorItems just filled: no round trip.
    const bounded = await queueMaxSizes(ctx, items.map((i) => i.queue));
    const results = bounded.size
      ? await appendCapped(ctx, items, rows, producerSub, bounded)
      : (await ctx.db.query<AllocatorResult>(...appendStatement(rows, producerSub))).rows;
    ctx.totals.touch(rows.map((r) => r.partition_id));
    for (const [queue, partitions] of partitionsByQueue(items)) ctx.notifier.notify(queue, partitions);
    countPushes(ctx, items, results);
    return results.map((r, index) => pushResultOf(index, items[index]!, rows[index]!.partition_id, r.status, r.message_id, r.offset));
  });
}

/**
 * The statement that appends allocator items (one row per item, in input
 * order) and its values: PUSH_RUN_SQL for one partition's items, else
 * PUSH_MANY_SQL. Shared by push and transaction.
 */
export function appendStatement(rows: AllocatorItem[], producerSub: string | null): [NamedStatement, unknown[]] {
  const partitionId = rows[0]!.partition_id;
  if (!rows.every((r) => r.partition_id === partitionId)) return [PUSH_MANY_SQL, [JSON.stringify(rows), producerSub]];
  return [PUSH_RUN_SQL, [partitionId, JSON.stringify(rows.map(({ partition_id: _, ...item }) => item)), producerSub]];
}

/** The partitions written per queue, for the wake-up (only pops they can feed wake). */
export function partitionsByQueue(items: { queue: string; partition: string }[]): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  for (const i of items) {
    let set = out.get(i.queue);
    if (!set) out.set(i.queue, (set = new Set()));
    set.add(i.partition);
  }
  return out;
}

function countPushes(ctx: BrokerContext, items: PushItem[], results: AllocatorResult[]): void {
  const queued = new Map<string, number>();
  const duplicate = new Map<string, number>();
  results.forEach((r, i) => tally(r.status === 'queued' ? queued : duplicate, items[i]!.queue));
  const m = ctx.metrics;
  for (const [queue, n] of queued) {
    m.pushed.inc({ queue }, n);
    m.history.add(queue, '', 'pushed', n);
  }
  for (const [queue, n] of duplicate) m.duplicates.inc({ queue }, n);
}

export function pushRoutes(app: FastifyInstance, ctx: BrokerContext): void {
  registerRoute(app, routes.push, async ({ body, request }) => {
    if (body.items.length > ctx.config.maxPushItems) {
      throw new QueenError('VALIDATION_FAILED', `at most ${ctx.config.maxPushItems} items per push`, {
        details: [{ field: 'body.items', message: `must have at most ${ctx.config.maxPushItems} items` }],
      });
    }
    // QUEUE_FULL carries retryAfter: the error handler answers it with Retry-After.
    return pushItems(ctx, body.items, request.principal?.subject ?? null);
  });
}
