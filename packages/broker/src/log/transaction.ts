import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { ackResultsOf, adminRoutes, pushResultOf, QueenError, type AckAnswer, type ErrorCode, type PushItem, type TransactionBody, type TxnAckOp } from '@queen-mq/protocol';
import type { BrokerContext } from '../context/context.js';
import { encryptedQueues, queueMaxSizes } from './encryption.js';
import { registerRoute } from '../http/http.js';
import { allocatorItems, appendStatement, assertRoom, boundedCounts } from './push.js';
import { scheduleTimers } from './schedule-timers.js';
import { TRANSACTION_ACK_SQL } from '../sql/queen.log_ack_v2.js';
import type { AllocatorResult } from '../sql/queen.log_append_v1.js';
import { LOCK_CURSORS_SQL } from '../sql/queen.log_lock_cursors_v1.js';

type Flat = { index: number; kind: 'push'; item: PushItem } | { index: number; kind: 'ack'; op: TxnAckOp };

/**
 * POST /api/v1/transaction (PROTOCOL §5.7): pushes and acks in ONE
 * PostgreSQL transaction. Target partitions are created first in their own
 * short transaction; then, in lock order (§4): the append locks of every push
 * target ascending and offsets in request order (queen.log_push_many_v1;
 * a duplicate is reported, never an abort), then the cursor rows of every ack
 * ascending, then the acks in request order. Acks follow §5.5 steps 1–3 and
 * 5, except that `failed` dead-letters immediately (compat). Any failing ack
 * or kv op rolls everything back and answers 200 `success:false`. A push
 * into a queue whose maxSize leaves no room for its items rolls everything
 * back too and answers 429 QUEUE_FULL with Retry-After, as a push does.
 */
async function runTransaction(ctx: BrokerContext, body: TransactionBody, producerSub: string | null) {
  const transactionId = randomUUID();
  const flat: Flat[] = [];
  for (const op of body.operations ?? []) {
    if (op.type === 'push') for (const item of op.items) flat.push({ index: flat.length, kind: 'push', item });
    else flat.push({ index: flat.length, kind: 'ack', op });
  }
  const pushes = flat.filter((f): f is Extract<Flat, { kind: 'push' }> => f.kind === 'push');
  const acks = flat.filter((f): f is Extract<Flat, { kind: 'ack' }> => f.kind === 'ack');
  const cursorTargets = JSON.stringify(acks.map((a) => ({ partitionId: a.op.partitionId, consumerGroup: a.op.consumerGroup })));
  const transactionKv = ctx.hooks.transactionKv;
  // The failure of a kv op or an ack: it rolls everything back, and the answer is still 200.
  let itemFailure: QueenError | undefined;
  const asItemFailure = (err: unknown): never => {
    if (err instanceof QueenError) itemFailure = err;
    throw err;
  };

  try {
    return await ctx.partitions.retrying(async () => {
      // Partitions ensured and payloads of encrypted queues encrypted before any lock (the push path's own helper).
      const rows = pushes.length ? await allocatorItems(ctx, pushes.map((p) => p.item)) : [];
      // Cursor rows of existing partitions are created before the main transaction too (§4),
      // so it never inserts under a partition lock it does not already hold.
      if (acks.length) await ctx.db.query(LOCK_CURSORS_SQL, [cursorTargets]);
      // Timer targets' flags read (or cached) before the transaction holds any lock, as the pushes' are.
      if (body.timers?.length) await encryptedQueues(ctx, body.timers.map((t) => t.queue));
      // The acks applied, for the history once the transaction committed.
      let applied: { queue: string; group: string; status: string; dlq: boolean }[] = [];
      // The pushes' items per bounded queue (cached options, filled by allocatorItems): an unbounded transaction checks nothing.
      const counts = boundedCounts(pushes.map((p) => p.item), await queueMaxSizes(ctx, pushes.map((p) => p.item.queue)));
      const { results, kvResults, timerResults } = await ctx.db.transaction(async (client) => {
        const out: Record<string, unknown>[] = new Array(flat.length);
        applied = [];
        const kvResults = body.kv?.length ? await transactionKv!(client, body.kv, ctx).catch(asItemFailure) : [];
        const timerResults = body.timers?.length ? await scheduleTimers(client, body.timers, producerSub, ctx) : [];
        if (pushes.length) {
          // Bounded queues locked and counted before the first append lock: a queue without room
          // throws QUEUE_FULL (429) and the whole transaction rolls back.
          await assertRoom(ctx, client, counts, 'transaction');
          const [statement, values] = appendStatement(rows, producerSub);
          const { rows: res } = await client.query<AllocatorResult>({ ...statement, values });
          res.forEach((r, i) => {
            const p = pushes[i]!;
            const pushed = pushResultOf(p.index, p.item, rows[i]!.partition_id, r.status, r.message_id, r.offset);
            // §5.7 names the same fields in camelCase.
            out[p.index] = {
              index: p.index,
              type: 'push',
              success: true,
              status: pushed.status,
              transactionId: pushed.transaction_id,
              messageId: pushed.message_id,
              partitionId: pushed.partition_id,
              queueName: pushed.queueName,
              offset: pushed.offset,
            };
          });
        }
        if (acks.length) {
          await client.query(LOCK_CURSORS_SQL, [cursorTargets]);
          for (const a of acks) {
            const item = {
              idx: 0,
              transactionId: a.op.transactionId,
              partitionId: a.op.partitionId,
              status: a.op.status === 'failed' ? 'dlq' : a.op.status,
              leaseId: a.op.leaseId,
              error: a.op.error,
            };
            const { rows } = await client.query<{ answer: AckAnswer }>(TRANSACTION_ACK_SQL, [a.op.consumerGroup, JSON.stringify([item])]);
            const r = ackResultsOf([item], rows[0]!.answer)[0]!;
            if (!r.success) asItemFailure(new QueenError((r.code as ErrorCode | null) ?? 'MESSAGE_NOT_FOUND', r.error ?? undefined));
            if (!r.alreadyAcked && r.queueName !== null) applied.push({ queue: r.queueName, group: a.op.consumerGroup, status: item.status, dlq: r.dlq });
            out[a.index] = { index: a.index, type: 'ack', success: true, transactionId: a.op.transactionId, error: null, dlq: r.dlq };
          }
        }
        return { results: out, kvResults, timerResults };
      });
      ctx.totals.touch([...rows.map((r) => r.partition_id), ...acks.map((a) => a.op.partitionId)]);
      for (const queue of new Set(pushes.map((p) => p.item.queue))) ctx.notifier.notify(queue);
      const history = ctx.metrics.history;
      for (const r of results) if (r?.type === 'push' && r.status === 'queued') history.add(r.queueName as string, '', 'pushed', 1);
      for (const a of applied) {
        history.addAck(a.queue, a.group, a.status, 1);
        if (a.dlq) history.add(a.queue, a.group, 'dead', 1);
      }
      return { transactionId, success: true, results, kvResults, timerResults };
    });
  } catch (err) {
    if (err !== undefined && err === itemFailure) {
      return { ...itemFailure.extra, transactionId, success: false, error: itemFailure.message, code: itemFailure.code, results: [] };
    }
    throw err;
  }
}

export function transactionRoutes(app: FastifyInstance, ctx: BrokerContext): void {
  registerRoute(app, adminRoutes.transaction, async ({ body, request }) => {
    // kv and timers are validated here (PROTOCOL §5.7); without the KV
    // feature composed in they are refused clearly, never dropped silently.
    const pushItems = (body.operations ?? []).reduce((n, op) => n + (op.type === 'push' ? op.items.length : 0), 0);
    const details = [
      ...(body.kv?.length && !ctx.hooks.transactionKv ? [{ field: 'body.kv', message: 'kv is not enabled on this broker' }] : []),
      // QUEEN_MAX_PUSH_ITEMS bounds a transaction's push items in total, as it bounds a push.
      ...(pushItems > ctx.config.maxPushItems
        ? [{ field: 'body.operations', message: `must hold at most ${ctx.config.maxPushItems} push items in total (got ${pushItems})` }]
        : []),
    ];
    if (details.length) throw new QueenError('VALIDATION_FAILED', details.map((d) => d.message).join('; '), { details });
    return runTransaction(ctx, body, request.principal?.subject ?? null);
  });
}
