import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type pg from 'pg';
import { adminRoutes, QueenError, type ErrorCode, type PushItem, type TransactionBody, type TxnAckOp, type TxnKvOp, type TxnTimer } from '@queen-mq/protocol';
import { ackResultsOf, type AckAnswer } from './ack.js';
import type { BrokerContext } from './context.js';
import { encryptedQueues, encryptPayload } from './encryption.js';
import { registerRoute } from './http.js';
import { PUSH_MANY_SQL, type AllocatorResult } from './push.js';
import { scheduleTimers } from './timers.js';


/**
 * An item failure inside the transaction (MESSAGE_NOT_FOUND, LEASE_EXPIRED,
 * VERSION_CONFLICT, ...): everything rolls back and the answer is still 200
 * `{success:false, code, error, results:[]}`. Extensions throw it too.
 */
export class TransactionItemError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

/**
 * The `kv` and `timers` arrays of a transaction are applied by the KV
 * feature, composed in per broker. Each runs on the transaction's client, in
 * lock order (kv rows, then timers, before any append lock), answers its
 * result array, and throws TransactionItemError to roll everything back.
 */
export interface TransactionExtension {
  kv?: (client: pg.PoolClient, ops: TxnKvOp[], ctx: BrokerContext) => Promise<Record<string, unknown>[]>;
  timers?: (client: pg.PoolClient, timers: TxnTimer[], ctx: BrokerContext, producerSub: string | null) => Promise<Record<string, unknown>[]>;
}

const extensions = new WeakMap<BrokerContext, TransactionExtension>();

/** Called by the KV plugin when it is composed into a broker. */
export function setTransactionExtension(ctx: BrokerContext, extension: TransactionExtension): void {
  extensions.set(ctx, { ...extensions.get(ctx), ...extension });
}

type Flat = { index: number; kind: 'push'; item: PushItem } | { index: number; kind: 'ack'; op: TxnAckOp };

/**
 * POST /api/v1/transaction (PROTOCOL §5.7): pushes and acks in ONE
 * PostgreSQL transaction. Target partitions are created first in their own
 * short transaction; then, in lock order (§4): the append locks of every push
 * target ascending and offsets in request order (queen.log_push_many_v1;
 * a duplicate is reported, never an abort), then the cursor rows of every ack
 * ascending, then the acks in request order. Acks follow §5.5 steps 1–3 and
 * 5, except that `failed` dead-letters immediately (compat). Any failing ack
 * rolls everything back.
 */
export async function runTransaction(ctx: BrokerContext, body: TransactionBody, producerSub: string | null) {
  const transactionId = randomUUID();
  const flat: Flat[] = [];
  for (const op of body.operations ?? []) {
    if (op.type === 'push') for (const item of op.items) flat.push({ index: flat.length, kind: 'push', item });
    else flat.push({ index: flat.length, kind: 'ack', op });
  }
  const pushes = flat.filter((f): f is Extract<Flat, { kind: 'push' }> => f.kind === 'push');
  const acks = flat.filter((f): f is Extract<Flat, { kind: 'ack' }> => f.kind === 'ack');
  const cursorTargets = JSON.stringify(acks.map((a) => ({ partitionId: a.op.partitionId, consumerGroup: a.op.consumerGroup })));

  for (let attempt = 0; ; attempt++) {
    const dir = await ctx.partitions.ensure(pushes.map((p) => ({ queue: p.item.queue, partition: p.item.partition })));
    // Cursor rows of existing partitions are created before the main transaction too (§4),
    // so it never inserts under a partition lock it does not already hold.
    if (acks.length) await ctx.db.query('select queen.log_lock_cursors_v1($1::jsonb)', [cursorTargets]);
    // Flags of push and timer targets read (or cached) before the transaction holds any lock.
    const encrypted = await encryptedQueues(ctx, [...pushes.map((p) => p.item.queue), ...(body.timers ?? []).map((t) => t.queue)]);
    try {
      const ext = extensions.get(ctx) ?? {};
      const { results, kvResults, timerResults } = await ctx.db.transaction(async (client) => {
        const out: Record<string, unknown>[] = new Array(flat.length);
        const kvResults = body.kv?.length ? await ext.kv!(client, body.kv, ctx) : [];
        const timerResults = body.timers?.length ? await scheduleTimers(client, body.timers, producerSub, ctx) : [];
        if (pushes.length) {
          const rows = pushes.map((p) => ({
            partition_id: ctx.partitions.get(dir, p.item.queue, p.item.partition).partitionId,
            ...(encrypted.has(p.item.queue) ? { encrypted: encryptPayload(ctx, p.item.payload) } : { payload: p.item.payload }),
            transaction_id: p.item.transactionId,
            trace_id: p.item.traceId,
          }));
          const { rows: res } = await client.query<AllocatorResult>({ ...PUSH_MANY_SQL, values: [JSON.stringify(rows), producerSub] });
          res.forEach((r, i) => {
            const p = pushes[i]!;
            out[p.index] = {
              index: p.index,
              type: 'push',
              success: true,
              status: r.status,
              transactionId: p.item.transactionId ?? r.message_id,
              messageId: r.message_id,
              partitionId: rows[i]!.partition_id,
              queueName: p.item.queue,
              offset: r.offset,
            };
          });
        }
        if (acks.length) {
          await client.query('select queen.log_lock_cursors_v1($1::jsonb)', [cursorTargets]);
          for (const a of acks) {
            const item = {
              idx: 0,
              transactionId: a.op.transactionId,
              partitionId: a.op.partitionId,
              status: a.op.status === 'failed' ? 'dlq' : a.op.status,
              leaseId: a.op.leaseId,
              error: a.op.error,
            };
            const { rows } = await client.query<{ r: AckAnswer }>('select queen.log_ack_v1($1, $2::jsonb) as r', [a.op.consumerGroup, JSON.stringify([item])]);
            const r = ackResultsOf([item], rows[0]!.r)[0]!;
            if (!r.success) throw new TransactionItemError((r.code as ErrorCode | null) ?? 'MESSAGE_NOT_FOUND', r.error ?? 'ack failed');
            out[a.index] = { index: a.index, type: 'ack', success: true, transactionId: a.op.transactionId, error: null, dlq: r.dlq };
          }
        }
        return { results: out, kvResults, timerResults };
      });
      for (const queue of new Set(pushes.map((p) => p.item.queue))) ctx.notifier.notify(queue);
      return { transactionId, success: true, results, kvResults, timerResults };
    } catch (err) {
      if (err instanceof TransactionItemError) {
        return { ...err.extra, transactionId, success: false, error: err.message, code: err.code, results: [] };
      }
      if ((err as { code?: string }).code === 'P0002' && attempt === 0) {
        // A push target was deleted (queue delete, cleanup) after we resolved it: resolve again once.
        ctx.partitions.forget();
        continue;
      }
      throw err;
    }
  }
}

export function transactionRoutes(app: FastifyInstance, ctx: BrokerContext): void {
  registerRoute(app, adminRoutes.transaction, async ({ body, request }) => {
    // kv and timers are validated here (PROTOCOL §5.7); without the KV
    // feature composed in they are refused clearly, never dropped silently.
    const ext = extensions.get(ctx) ?? {};
    const pushItems = (body.operations ?? []).reduce((n, op) => n + (op.type === 'push' ? op.items.length : 0), 0);
    const details = [
      ...(body.kv?.length && !ext.kv ? [{ field: 'body.kv', message: 'kv is not enabled on this broker' }] : []),
      // QUEEN_MAX_PUSH_ITEMS bounds a transaction's push items in total, as it bounds a push.
      ...(pushItems > ctx.config.maxPushItems
        ? [{ field: 'body.operations', message: `must hold at most ${ctx.config.maxPushItems} push items in total (got ${pushItems})` }]
        : []),
    ];
    if (details.length) throw new QueenError('VALIDATION_FAILED', details.map((d) => d.message).join('; '), { details });
    return runTransaction(ctx, body, request.principal?.subject ?? null);
  });
}
