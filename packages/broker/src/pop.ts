import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { popQuery, QueenError, routes, type PopQuery, type PopResponse, type PoppedMessage } from '@queen-mq/protocol';
import type { BrokerContext } from './context.js';
import type { NamedStatement } from './database.js';
import { tryReadPayload, type UnreadableReason } from './encryption.js';
import { registerRoute } from './http.js';

interface PopRow {
  partition_id: string;
  partition_name: string;
  msg_offset: string;
  id: string;
  transaction_id: string;
  trace_id: string | null;
  payload: unknown;
  encrypted: Buffer | null;
  producer_sub: string | null;
  created_at: string;
  retry_count: number;
  /** Expired leases the pop released (0 on message rows; a trailing row without a message carries the count). */
  lease_expired: number | null;
}

type PopOutcome = { kind: 'messages'; body: PopResponse } | { kind: 'empty' } | { kind: 'paused' };

function subscriptionStart(ctx: BrokerContext, q: PopQuery): { mode: string; start: string | null } {
  if (q.subscriptionFrom && q.subscriptionFrom !== 'now') return { mode: 'timestamp', start: q.subscriptionFrom };
  if (q.subscriptionFrom === 'now' || q.subscriptionMode === 'new') return { mode: 'new', start: 'now' };
  if (q.subscriptionMode === 'all') return { mode: 'all', start: null };
  return ctx.config.defaultSubscriptionMode === 'new' ? { mode: 'new', start: 'now' } : { mode: 'all', start: null };
}

/** The pop statement, parsed once per connection (the hot path of every consumer). */
const POP_SQL: NamedStatement = {
  name: 'queen_pop',
  text: `select t.paused, r.*
       from (select q.id as queue_id, p.id as partition_id,
                    coalesce((select (value)::text::boolean from queen.flags where name = 'pop_paused'), false) as paused
               from (select 1) one
               left join queen.queues q on q.name = $1
               left join queen.partitions p on p.queue_id = q.id and p.name = $2) t
       left join lateral queen.log_pop_v3(
              case when not t.paused and ($2::text is null or t.partition_id is not null) then t.queue_id end,
              t.partition_id, $3, $4, $5, $6, $7, $8,
              case when $9::text = 'now' then now() else $9::timestamptz end, $10) r on true`,
};

/**
 * One claim attempt, no waiting, in one round trip: the queue/partition
 * lookup, the pause flag and queen.log_pop_v1 run as one statement. An
 * unknown queue or partition claims nothing and creates nothing.
 * Payloads stored encrypted are decrypted here (encryption.ts).
 */
async function popOnce(ctx: BrokerContext, queue: string, partition: string | null, q: PopQuery): Promise<PopOutcome> {
  const leaseId = randomUUID();
  const sub = subscriptionStart(ctx, q);
  let { rows } = await ctx.db.query<PopRow & { paused: boolean }>(
    POP_SQL,
    [queue, partition, q.consumerGroup, q.batch, partition === null ? q.partitions : 1, q.autoAck, leaseId, sub.mode, sub.start, ctx.config.maxPopBytes || null],
  );
  if (rows[0]?.paused) return { kind: 'paused' };
  let expired = 0;
  for (const r of rows) expired += r.lease_expired ?? 0;
  if (expired > 0) ctx.metrics.leaseExpired.inc({ queue }, expired);
  rows = rows.filter((r) => r.msg_offset !== null);
  if (rows.length === 0) return { kind: 'empty' };
  const { delivered, data } = await readableRows(ctx, rows, q, leaseId);
  rows = delivered as typeof rows;
  ctx.metrics.delivered.inc({ queue }, rows.length);

  const wireLease = q.autoAck ? '' : leaseId;
  const messages: PoppedMessage[] = rows.map((r, i) => ({
    id: r.id,
    transactionId: r.transaction_id,
    traceId: r.trace_id,
    data: data[i],
    producerSub: r.producer_sub,
    createdAt: r.created_at,
    partitionId: r.partition_id,
    partition: r.partition_name,
    queue,
    leaseId: wireLease,
    consumerGroup: q.consumerGroup,
    offset: r.msg_offset,
    retryCount: r.retry_count,
  }));
  const first = rows[0]!;
  return {
    kind: 'messages',
    body: {
      success: true,
      queue,
      partition: first.partition_name,
      partitionId: first.partition_id,
      leaseId: wireLease,
      consumerGroup: q.consumerGroup,
      partitionsClaimed: new Set(rows.map((r) => r.partition_id)).size,
      messages,
    },
  };
}

/**
 * The claimed rows this pop may deliver, with their payloads. Encryption
 * never downgrades: a payload this broker cannot decrypt (no key, wrong key,
 * corrupt bytes) is never delivered as null. Per partition the messages from
 * the first unreadable one on are handed back (queen.log_pop_return_v1: the
 * lease shrinks or ends, an autoAck cursor steps back), and when nothing is
 * left to deliver the pop answers ENCRYPTION_KEY_MISSING (503) or
 * PAYLOAD_UNDECRYPTABLE (500) naming the message, which stays in place.
 */
async function readableRows(ctx: BrokerContext, rows: PopRow[], q: PopQuery, leaseId: string): Promise<{ delivered: PopRow[]; data: unknown[] }> {
  const delivered: PopRow[] = [];
  const data: unknown[] = [];
  const stopped = new Map<string, { from: string; last: string; reason: UnreadableReason; row: PopRow }>();
  for (const r of rows) {
    const stop = stopped.get(r.partition_id);
    if (stop) {
      stop.last = r.msg_offset;
      continue;
    }
    const read = tryReadPayload(ctx, r);
    if ('data' in read) {
      delivered.push(r);
      data.push(read.data);
    } else stopped.set(r.partition_id, { from: r.msg_offset, last: r.msg_offset, reason: read.unreadable, row: r });
  }
  if (stopped.size === 0) return { delivered, data };
  const items = [...stopped].map(([partitionId, s]) => ({ partitionId, from: s.from, last: s.last }));
  await ctx.db.query('select queen.log_pop_return_v1($1, $2, $3, $4::jsonb)', [q.consumerGroup, leaseId, q.autoAck, JSON.stringify(items)]);
  const [first] = stopped.values();
  const where = { queue: first!.row.partition_name, partitionId: first!.row.partition_id, offset: first!.from, transactionId: first!.row.transaction_id };
  ctx.log.error({ ...where, reason: first!.reason }, 'encrypted payload cannot be read on this broker: not delivered, left in place');
  if (delivered.length > 0) return { delivered, data };
  if (first!.reason === 'missing') {
    throw new QueenError('ENCRYPTION_KEY_MISSING', `Message ${where.transactionId} is encrypted but QUEEN_ENCRYPTION_KEY is not set on this broker; it was not delivered and stays in place`, {
      extra: { partitionId: where.partitionId, transactionId: where.transactionId },
    });
  }
  throw new QueenError('PAYLOAD_UNDECRYPTABLE', `Message ${where.transactionId} does not decrypt with this broker's key (wrong key or corrupt bytes); it was not delivered and stays in place`, {
    extra: { partitionId: where.partitionId, transactionId: where.transactionId },
  });
}

/**
 * Pop with optional long-poll (PROTOCOL §3.8): parked in the wait room
 * (wait-room.ts) until a write it can be fed by, the pop before it in its
 * line finding messages, its line's once-a-second re-check, or the timeout.
 * A client disconnect abandons the wait without claiming anything; shutdown
 * answers 204.
 */
export function popRoutes(app: FastifyInstance, ctx: BrokerContext): void {
  const limits = { maxBatch: ctx.config.maxPopBatch, maxTimeoutMs: ctx.config.maxPopTimeoutMs };
  const query = popQuery(limits);
  const handler = async ({ params, query: q, request, reply }: { params: { queue: string; partition?: string }; query: PopQuery; request: any; reply: any }) => {
    const deadline = Date.now() + (q.wait ? q.timeout : 0);
    const gone = new AbortController();
    request.raw.once('close', () => gone.abort());
    reply.raw.once('close', () => gone.abort());
    let parked = false;
    try {
      for (;;) {
        const outcome = await popOnce(ctx, params.queue, params.partition ?? null, q);
        if (outcome.kind === 'messages') {
          // There may be more for the next pop parked in this line.
          ctx.notifier.room.wakeNext(params.queue, q.consumerGroup, params.partition ?? null);
          return outcome.body;
        }
        if (outcome.kind === 'paused') {
          reply.header('X-Queen-Pop-Paused', 'true');
          return reply.code(204).send();
        }
        const left = deadline - Date.now();
        if (!q.wait || left <= 0 || gone.signal.aborted || ctx.shutdown.aborted) return reply.code(204).send();
        if (!parked) {
          parked = true;
          ctx.metrics.longPollWaiting.inc();
        }
        await ctx.notifier.room.park(params.queue, q.consumerGroup, params.partition ?? null, left, gone.signal, ctx.shutdown);
        if (gone.signal.aborted) return reply.code(204).send();
      }
    } finally {
      if (parked) ctx.metrics.longPollWaiting.dec();
    }
  };
  registerRoute(app, { ...routes.popQueue, query }, handler as never);
  registerRoute(app, { ...routes.popPartition, query }, handler as never);
}
