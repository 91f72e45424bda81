import type pg from 'pg';
import { isOutage } from '../db/database.js';
import { setMaintenanceTask, type BrokerContext } from '../context/context.js';
import { encryptionAvailable, encryptPayload } from '../log/encryption.js';

// Timers (PROTOCOL §6): scheduled only through the transaction route
// (log/schedule-timers.ts), fired by this poller, which every replica runs. SQL: src/sql/queen.log_timers_*_v1.sql (the table: migrations/005_timers.sql).

/** Timers one fire transaction claims at most; a full batch polls again at once. */
const FIRE_BATCH = 500;

function isDbUnavailable(err: unknown): boolean {
  return isOutage(err);
}

interface FireResult {
  fired: number;
  missing: number;
  queues: string[];
  /** The partitions written (for the listing totals). */
  partitions: string[];
  /** Due plaintext timers of queues encrypted since they were scheduled (not fired). */
  held?: number;
  /** Due timers left due because their queue had no room under its maxSize. */
  waiting?: number;
}

/**
 * Encrypts, in place, the payloads of due timers that were scheduled in
 * plaintext for a queue that has encryptionEnabled now, so the firer never
 * stores plaintext into an encrypted queue. Without a key it logs (once until
 * the held timers are gone) and leaves them to a broker that has one.
 * Answers how many it encrypted.
 */
async function encryptHeldTimers(ctx: BrokerContext): Promise<number> {
  if (!encryptionAvailable(ctx)) {
    if (!ctx.timers.heldWarned) {
      ctx.log.warn('timers are due for queues with encryptionEnabled but hold plaintext, and QUEEN_ENCRYPTION_KEY is not set on this broker: they wait for a broker with the key');
      ctx.timers.heldWarned = true;
    }
    return 0;
  }
  const { rows } = await ctx.db.query<{ id: string; payload: unknown }>(
    `select t.id, t.payload from queen.log_timers t
      where t.fire_at <= clock_timestamp() and queen.timer_held_v1(t.queue_name, t.encrypted)
      order by t.fire_at, t.id limit $1`,
    [FIRE_BATCH],
  );
  if (rows.length === 0) return 0;
  const { rowCount } = await ctx.db.query(
    `update queen.log_timers t set encrypted = decode(x.enc, 'base64'), payload = null
       from unnest($1::uuid[], $2::text[]) as x(id, enc)
      where t.id = x.id and t.encrypted is null`,
    [rows.map((r) => r.id), rows.map((r) => encryptPayload(ctx, r.payload))],
  );
  return rowCount ?? 0;
}

/**
 * One batch of due timers fired in one transaction (queen.log_timers_fire_v1)
 * on `client` (already inside a transaction) or in a transaction of its own.
 */
async function fireBatch(ctx: BrokerContext, client?: pg.PoolClient): Promise<FireResult> {
  // Without a client the single statement is its own transaction: one round trip per poll.
  const sql = 'select queen.log_timers_fire_v1($1) as r';
  const { rows } = client ? await client.query<{ r: FireResult }>(sql, [FIRE_BATCH]) : await ctx.db.query<{ r: FireResult }>(sql, [FIRE_BATCH]);
  return rows[0]!.r;
}

/**
 * Creates the missing target queues and partitions of due timers, each in
 * its own short transaction before the fire transaction (PROTOCOL §4).
 */
async function ensureDueTargets(ctx: BrokerContext): Promise<void> {
  const { rows } = await ctx.db.query<{ queue: string; partition: string }>(
    `select distinct t.queue_name as queue, t.partition_name as partition
       from queen.log_timers t
      where t.fire_at <= clock_timestamp()
        and not exists (select 1 from queen.queues q join queen.partitions p on p.queue_id = q.id
                         where q.name = t.queue_name and p.name = t.partition_name)
      limit 1000`,
  );
  // Straight to SQL, not the partition cache: a cached id may name a
  // partition deleted since, which is exactly why the timer found none.
  if (rows.length) await ctx.db.query('select 1 from queen.ensure_partitions_v1($1::jsonb)', [JSON.stringify(rows)]);
}

/**
 * Fires every timer due now; answers how many. Replicas running it at once
 * share the work (SKIP LOCKED) and never fire one timer twice. Long-pollers
 * of the target queues are woken here and, through the allocator's NOTIFY,
 * on every other replica.
 */
export async function fireDueTimers(ctx: BrokerContext, client?: pg.PoolClient): Promise<number> {
  let total = 0;
  let ensured = 0;
  for (let round = 0; round < 1000; round++) {
    const r = await fireBatch(ctx, client);
    total += r.fired;
    if (r.fired) ctx.metrics.timersFired.inc(r.fired);
    // They stay due and fire on a later pass, once a consumer made room.
    if (r.waiting) ctx.metrics.firesWaitingForRoom.inc({ source: 'timer' }, r.waiting);
    ctx.totals.touch(r.partitions);
    for (const queue of r.queues) ctx.notifier.notify(queue);
    let encrypted = 0;
    if (r.held) encrypted = await encryptHeldTimers(ctx);
    else ctx.timers.heldWarned = false;
    if (r.missing > 0 && ensured < 3) {
      ensured++;
      await ensureDueTargets(ctx);
      continue;
    }
    // Held timers just encrypted fire on the next batch.
    if (r.fired < FIRE_BATCH && encrypted === 0) break;
  }
  return total;
}

/**
 * The timer firer service (started by default on every broker): a pass every
 * QUEEN_TIMER_POLL_MS, never two at once in one process. Fires are never
 * early and normally land within one poll interval plus the push. It also
 * answers the `timers` task of POST /api/v1/system/maintenance/run.
 */
export function timerService(ctx: BrokerContext): { stop(): Promise<void> } {
  setMaintenanceTask(ctx, 'timers', async (client) => ({ fired: await fireDueTimers(ctx, client) }));
  let running: Promise<unknown> | undefined;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const again = () => {
    if (stopped) return;
    timer = setTimeout(tick, Math.max(ctx.config.timerPollMs, 10));
    timer.unref();
  };
  const tick = () => {
    if (stopped || ctx.shutdown.aborted) return;
    // While PostgreSQL is down the Database probes for it and has logged the
    // outage once; a pass now would only fail (and log) every poll.
    if (!ctx.db.available) return again();
    running = fireDueTimers(ctx)
      .catch((err) => {
        if (!isDbUnavailable(err)) ctx.log.warn({ err }, 'timer fire pass failed');
      })
      .finally(() => {
        running = undefined;
        again();
      });
  };
  timer = setTimeout(tick, Math.max(ctx.config.timerPollMs, 10));
  timer.unref();
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
