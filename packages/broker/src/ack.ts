import type { FastifyInstance } from 'fastify';
import { ackResultsOf, routes, type AckAnswer, type AckItem, type AckResult } from '@queen-mq/protocol';
import type { BrokerContext } from './context.js';
import type { NamedStatement } from './database.js';
import { registerRoute } from './http.js';
import { tally } from './metrics.js';
import type { WaitRoom } from './wait-room.js';

/**
 * The SQL of an ack request, parsed once per connection: the ack, then (in
 * the `ask` form) which of the partitions it named a pop of the group could
 * claim now, asked in a snapshot taken after the ack's changes (migration
 * 017). Two statements, not a boolean parameter: a custom plan folds such a
 * CASE away, so the generic plan always looked dearer and PostgreSQL planned
 * the statement again on every call (30-50 µs of an ack's 350-500).
 */
export const ACK_SQL = {
  skip: { name: 'queen_ack', text: 'with a as materialized (select queen.log_ack_v1($1, $2::jsonb) as r) select a.r, $3::uuid[] as claimable from a' },
  ask: {
    name: 'queen_ack_claimable',
    text: 'with a as materialized (select queen.log_ack_v1($1, $2::jsonb) as r) select a.r, queen.log_claimable_of_v1($3::uuid[], $1) as claimable from a',
  },
} satisfies Record<string, NamedStatement>;

/**
 * The ack of one pop's run (migration 018): its offsets and transaction ids
 * as arrays, no jsonb. The claimable check as in ACK_SQL, only once the run
 * was applied.
 */
const ACK_RUN = 'with a as materialized (select * from queen.log_ack_run_v1($1, $2, $3, $4::bigint[], $5::text[])) select a.ok, a.released, a.queue_name, a.partition_name';
export const ACK_RUN_SQL = {
  skip: { name: 'queen_ack_run', text: `${ACK_RUN}, array[$2::uuid] as claimable from a` },
  ask: { name: 'queen_ack_run_claimable', text: `${ACK_RUN}, case when a.ok then queen.log_claimable_of_v1(array[$2::uuid], $1) else array[$2::uuid] end as claimable from a` },
} satisfies Record<string, NamedStatement>;

/** An offset as PostgreSQL prints a bigint: the answer repeats the item's own. */
const CANONICAL_OFFSET = /^(0|[1-9][0-9]*)$/;

/** One pop's run, as queen.log_ack_run_v1 takes it. */
interface AckRun {
  partitionId: string;
  leaseId: string | null;
  offsets: string[];
  txids: string[];
}

/** What queen.log_ack_run_v1 answers (`released`: the offset whose move ended the lease). */
export interface AckRunRow {
  ok: boolean;
  released: string | null;
  queue_name: string;
  partition_name: string;
}

/**
 * The items of the ack a consumer sends after a pop, as log_ack_run_v1
 * takes them: one partition, one lease (or none), every item completed and
 * carrying the offset the pop answered. Null for any other ack.
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

/** An applied run's answer in log_ack_v1's compact form (every item succeeded). */
export function runAnswerOf(run: AckRun, row: AckRunRow): AckAnswer {
  return { offsets: run.offsets, released: run.offsets.map((o) => o === row.released), names: { [run.partitionId]: [row.queue_name, row.partition_name] } };
}

/**
 * A pop's run acked by log_ack_run_v1; null when the function found
 * something for log_ack_v1 to answer item by item (it then changed nothing).
 */
async function ackRun(ctx: BrokerContext, group: string, items: AckItem[], askClaimable: boolean): Promise<{ answer: AckAnswer; claimable: string[] } | null> {
  const run = runOf(items);
  if (!run) return null;
  const { rows } = await ctx.db.query<AckRunRow & { claimable: string[] }>(askClaimable ? ACK_RUN_SQL.ask : ACK_RUN_SQL.skip, [group, run.partitionId, run.leaseId, run.offsets, run.txids]);
  const row = rows[0]!;
  return row.ok ? { answer: runAnswerOf(run, row), claimable: row.claimable } : null;
}

/**
 * Applies acks in one transaction: a pop's run through
 * queen.log_ack_run_v1, anything else (or a run it declines) through
 * queen.log_ack_v1: items grouped by (partition, group) in ascending offset
 * order, one item's failure never undoing another's; results in input order.
 */
async function ackItems(ctx: BrokerContext, group: string, items: AckItem[]): Promise<AckResult[]> {
  const room = ctx.notifier.room;
  const stamp = room.stamp();
  // Asked only while some pop is parked on this broker: without one, no
  // wake-up can be saved, and PostgreSQL's time can.
  const askClaimable = room.parked > 0;
  let acked = await ackRun(ctx, group, items, askClaimable);
  if (!acked) {
    const payload = items.map((item, idx) => ({ idx, ...item }));
    const partitionIds = [...new Set(items.map((i) => i.partitionId))];
    const { rows } = await ctx.db.query<{ r: AckAnswer; claimable: string[] }>(askClaimable ? ACK_SQL.ask : ACK_SQL.skip, [group, JSON.stringify(payload), partitionIds]);
    acked = { answer: rows[0]!.r, claimable: rows[0]!.claimable };
  }
  const results = ackResultsOf(items, acked.answer);
  countAcks(ctx, items, results);
  // A released lease can make its partition poppable again for this group:
  // wake this broker's waiters of the group for it when PostgreSQL says a
  // pop could claim it now, or when a write to it was woken while the ack
  // ran (its waiter may have found the partition still leased). Not
  // published to other brokers (a NOTIFY per ack batch is PostgreSQL work
  // on the hot path); their parked pops re-check within a second.
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
 * parked pops see it at their next re-check.
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
