import type { FastifyInstance } from 'fastify';
import { pushResultOf, QueenError, routes, type PushItem, type PushResult } from '@queen-mq/protocol';
import type { BrokerContext } from './context.js';
import type { NamedStatement } from './database.js';
import { encryptedQueues, encryptPayload } from './encryption.js';
import { registerRoute } from './http.js';
import { tally } from './metrics.js';
import { PUSH_RUN_SQL, type AllocatorItem, type AllocatorResult } from './sql/queen.log_append_v1.js';
import { PUSH_MANY_SQL } from './sql/queen.log_push_many_v1.js';

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
    partition_id: ctx.partitions.get(dir, i.queue, i.partition).partitionId,
    ...(encrypted.has(i.queue) ? { encrypted: encryptPayload(ctx, i.payload) } : { payload: i.payload }),
    transaction_id: i.transactionId,
    trace_id: i.traceId,
    traceparent: i.traceparent,
  }));
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
    const { rows: results } = await ctx.db.query<AllocatorResult>(...appendStatement(rows, producerSub));
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
  for (const [queue, n] of queued) m.pushed.inc({ queue }, n);
  for (const [queue, n] of duplicate) m.duplicates.inc({ queue }, n);
}

export function pushRoutes(app: FastifyInstance, ctx: BrokerContext): void {
  registerRoute(app, routes.push, async ({ body, request }) => {
    if (body.items.length > ctx.config.maxPushItems) {
      throw new QueenError('VALIDATION_FAILED', `at most ${ctx.config.maxPushItems} items per push`, {
        details: [{ field: 'body.items', message: `must have at most ${ctx.config.maxPushItems} items` }],
      });
    }
    return pushItems(ctx, body.items, request.principal?.subject ?? null);
  });
}
