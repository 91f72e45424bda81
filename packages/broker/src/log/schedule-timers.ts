import type pg from 'pg';
import type { TimerResult, TxnTimer } from '@queen-mq/protocol';
import type { BrokerContext } from '../context/context.js';
import { encryptedQueues, encryptPayload } from './encryption.js';

// Timers (PROTOCOL §6) enter the log only through the transaction route;
// maintenance/timers.ts fires them when due.

/**
 * A `fireAt` as the broker stores it: rounded UP to the millisecond, so a
 * sub-millisecond part never makes a timer fire early.
 */
function fireAtOf(fireAt: string): string {
  const ms = Date.parse(fireAt);
  const fraction = /\.(\d+)/.exec(fireAt)?.[1] ?? '';
  const subMs = fraction.length > 3 && /[1-9]/.test(fraction.slice(3));
  return new Date(ms + (subMs ? 1 : 0)).toISOString();
}

/**
 * Schedules the `timers` of a transaction on its client, after the KV ops
 * (rank 1) and before any append lock (rank 4). Rows commit with the
 * transaction, so a rolled-back transaction leaves no timer. A pending timer
 * with the same (queue, partition, transactionId) answers `duplicate` with
 * its own timerId. `delayMs` counts from now on the database's clock, the
 * one the firer compares with.
 */
export async function scheduleTimers(client: pg.PoolClient, timers: TxnTimer[], producerSub: string | null, ctx?: BrokerContext): Promise<TimerResult[]> {
  // A timer for an encrypted queue stores only ciphertext (by the flag at
  // scheduling time); the firer passes it through to the allocator.
  const encrypted = ctx ? await encryptedQueues(ctx, timers.map((t) => t.queue)) : new Set<string>();
  const wire = timers.map((t) => ({
    queue: t.queue,
    partition: t.partition,
    ...(encrypted.has(t.queue) ? { encrypted: encryptPayload(ctx!, t.payload) } : { payload: t.payload }),
    ...(t.delayMs !== undefined ? { delayMs: t.delayMs } : { fireAt: fireAtOf(t.fireAt!) }),
    ...(t.transactionId !== undefined ? { transactionId: t.transactionId } : {}),
  }));
  const { rows } = await client.query<{ r: TimerResult[] }>('select queen.log_timers_schedule_v1($1::jsonb, $2) as r', [JSON.stringify(wire), producerSub]);
  return rows[0]!.r;
}
