import type { FastifyInstance } from 'fastify';
import { ackResultsOf, routes, type AckAnswer, type AckItem, type AckResult } from '@queen-mq/protocol';
import type { BrokerContext } from '../context/context.js';
import { registerRoute } from '../http/http.js';
import { tally } from '../metrics/metrics.js';
import type { WaitRoom } from '../wait/wait-room.js';
import { ACK_SQL, ackParams, type AckCall, type AckRow, type AckRun } from '../sql/queen.log_ack_v2.js';

/** An offset as PostgreSQL prints a bigint: the answer repeats the item's own. */
const CANONICAL_OFFSET = /^(0|[1-9][0-9]*)$/;

/**
 * The items of the ack a consumer sends after a pop, as queen.log_ack_v2
 * takes them as arrays: one partition, one lease (or none), every item
 * completed and carrying the offset the pop answered. Null for any other ack.
 */
export function runOf(items: AckItem[]): AckRun | null {
  const { partitionId, leaseId } = items[0]!;
  const offsets: string[] = [];
  const txids: string[] = [];
  for (const i of items) {
    if (i.partitionId !== partitionId || i.leaseId !== leaseId || (i.status !== 'completed' && i.status !== 'success')) return null;
    if (i.offset === undefined || !CANONICAL_OFFSET.test(i.offset)) return null;
    offsets.push(i.offset);
    txids.push(i.transactionId);
  }
  return { partitionId, leaseId: leaseId ?? null, offsets, txids };
}

/** An applied run's answer in the compact form (every item succeeded). */
export function runAnswerOf(run: AckRun, row: Pick<AckRow, 'released' | 'queue_name' | 'partition_name'>): AckAnswer {
  return { offsets: run.offsets, released: run.offsets.map((o) => o === row.released), names: { [run.partitionId]: [row.queue_name!, row.partition_name!] } };
}

/**
 * Applies acks in one statement of queen.log_ack_v2 (one transaction): a
 * pop's run as arrays, anything else as jsonb; whatever the function's
 * cheaper paths do not take, its walk answers item by item, grouped by
 * (partition, group) in ascending offset order, one item's failure never
 * undoing another's. Results in input order.
 */
async function ackItems(ctx: BrokerContext, group: string, items: AckItem[]): Promise<AckResult[]> {
  const room = ctx.notifier.room;
  const stamp = room.stamp();
  // Asked only while some pop is parked on this broker: without one, no
  // wake-up can be saved, and PostgreSQL's time can.
  const askClaimable = room.parked > 0;
  const run = runOf(items);
  const call: AckCall = run ? { run } : { items: items.map((item, idx) => ({ idx, ...item })), partitionIds: [...new Set(items.map((i) => i.partitionId))] };
  const { rows } = await ctx.db.query<AckRow>(askClaimable ? ACK_SQL.ask : ACK_SQL.skip, ackParams(group, call));
  const row = rows[0]!;
  const acked = { answer: row.answer ?? runAnswerOf(run!, row), claimable: row.claimable };
  const results = ackResultsOf(items, acked.answer);
  ctx.totals.touch(items.map((i) => i.partitionId));
  countAcks(ctx, items, results);
  // A released lease can make its partition poppable again for this group:
  // wake this broker's waiters of the group for it when PostgreSQL says a
  // pop could claim it now, or when a write to it was woken while the ack
  // ran (its waiter may have found the partition still leased). Not
  // published to other brokers (a NOTIFY per ack batch is PostgreSQL work
  // on the hot path): their parked pops behind the lease had a message
  // pending, so their room's re-check looks again within a second.
  const claimable = new Set(acked.claimable);
  const woken = new Set<string>();
  results.forEach((r, i) => {
    if (r.retryAt && r.queueName && r.partitionName) wakeAtRetry(room, group, r.queueName, r.partitionName, r.retryAt);
    if (!r.leaseReleased || !r.queueName || !r.partitionName) return;
    const key = `${r.queueName}\u0000${r.partitionName}`;
    if (woken.has(key)) return;
    if (claimable.has(items[i]!.partitionId) || room.wokenSince(stamp, r.queueName, r.partitionName)) {
      woken.add(key);
      room.wakeGroup(r.queueName, group, [r.partitionName]);
    }
  });
  return results;
}

/**
 * A failed item held its partition back for the queue's retry delay: this
 * broker's parked pops of the group for it are woken when the delay passes
 * (a timer, not a re-check: the re-check runs once a second). Other brokers'
 * parked pops see it at their next re-check (the failed message is pending).
 */
function wakeAtRetry(room: WaitRoom, group: string, queue: string, partition: string, retryAt: string): void {
  // A few ms late on purpose: PostgreSQL's clock stamped retryAt, and a wake before it finds nothing.
  const timer = setTimeout(() => room.wakeGroup(queue, group, [partition]), Math.max(0, Date.parse(retryAt) - Date.now()) + 5);
  timer.unref();
}

function countAcks(ctx: BrokerContext, items: AckItem[], results: AckResult[]): void {
  const applied = new Map<string, number>();
  const dead = new Map<string, number>();
  results.forEach((r, i) => {
    if (!r.success || r.alreadyAcked || r.queueName === null) return;
    tally(applied, `${r.queueName}\u0000${items[i]!.status}`);
    if (r.dlq) tally(dead, r.queueName);
  });
  if (applied.size === 0) return;
  const m = ctx.metrics;
  for (const [key, n] of applied) {
    const [queue, status] = key.split('\u0000') as [string, string];
    m.acked.inc({ queue, status }, n);
  }
  for (const [queue, n] of dead) m.deadLettered.inc({ queue }, n);
}

export function ackRoutes(app: FastifyInstance, ctx: BrokerContext): void {
  registerRoute(app, routes.ack, async ({ body }) => {
    const { consumerGroup, ...item } = body;
    return ackItems(ctx, consumerGroup, [item]);
  });
  registerRoute(app, routes.ackBatch, async ({ body }) => ackItems(ctx, body.consumerGroup, body.acknowledgments));
}
