import type pg from 'pg';
import type { ScheduleMissed } from '@queen-mq/protocol';
import { isOutage } from '../db/database.js';
import type { BrokerContext } from '../context/context.js';
import { allocatorItems, appendStatement, partitionsByQueue } from '../log/push.js';
import { queueMaxSizes } from '../log/encryption.js';
import type { AllocatorItem, AllocatorResult } from '../sql/queen.log_append_v1.js';
import { compileSchedule, dueFires, type ScheduleClock } from './schedule-cron.js';

// The schedule firer every broker runs: it sleeps until the earliest
// next_fire_at (bounded, and woken when this broker creates a schedule), then
// fires what is due. Each fire pass is ONE transaction: due schedule rows are
// claimed FOR UPDATE SKIP LOCKED, their fire times pushed through the
// allocator (queen.log_append_v1, the path of every push) with the
// transactionId 'schedule:<name>:<fire time ISO>', and next_fire_at advanced,
// so two brokers never both push a fire time and a crash before the commit
// leaves it due. The allocator's dedup by transactionId is the second line.
// A schedule into a queue with a maxSize pushes only into room
// (queen.log_queue_room_v1.sql): the fire times that do not fit stay due,
// next_fire_at at the first of them, and room_wait_since set, so they are
// pushed (never dropped as missed) once a consumer made room.

/** Schedules one fire pass claims at most; a full batch passes again at once. */
const CLAIM_BATCH = 100;
/** A pass that left a due schedule unfired (its queue's key is missing, ...) waits this long before the next. */
const RETRY_MS = 1000;

interface DueRow {
  name: string;
  cron: string;
  time_zone: string;
  queue_name: string;
  partition_name: string;
  payload: unknown;
  missed: ScheduleMissed;
  next_fire_at: Date;
  producer_sub: string | null;
  now: Date;
  /** Since when the schedule has waited for room in its queue (null: not waiting). */
  room_wait_since: Date | null;
}

/** `schedule:<name>:<fire time ISO>`: the same fire time is the same message whichever broker pushes it. */
function scheduleTransactionId(name: string, fireTime: Date): string {
  return `schedule:${name}:${fireTime.toISOString()}`;
}

/**
 * Compiled clocks by definition, so a pass does not parse an expression
 * again. A memo of a pure function (no broker's state), bounded.
 */
const clocks = new Map<string, ScheduleClock>();
function clockOf(cron: string, timeZone: string): ScheduleClock {
  const key = `${timeZone}\u0000${cron}`;
  let clock = clocks.get(key);
  if (!clock) {
    if (clocks.size >= 10_000) clocks.clear();
    clocks.set(key, (clock = compileSchedule(cron, timeZone)));
  }
  return clock;
}

interface PassResult {
  /** Messages appended (duplicates of a fire time already pushed not counted). */
  fired: number;
  /** Schedules advanced. */
  advanced: number;
  /** Due schedules left due (an error of their own). */
  held: number;
  /** Fire times left due because their queue was at its maxSize. */
  waiting: number;
  /** The batch was full: more may be due. */
  full: boolean;
  /** Where messages went, for the wake-up after the commit. */
  targets: { queue: string; partition: string }[];
  /** The partitions written, for the listing totals after the commit. */
  written: string[];
}

/** How a pass moves one schedule on. */
interface Advance {
  name: string;
  next: Date;
  last: Date | null;
  /** Fire times are left due for want of room in its queue. */
  waiting: boolean;
}

/**
 * Cuts the runs into bounded queues down to the room left (in next_fire_at
 * order, oldest fire time first): the rows of those queues are locked and
 * counted after the schedule rows and before any append lock (PROTOCOL §4),
 * so the room cannot shrink before the appends. A schedule cut short keeps
 * next_fire_at at its first fire time not pushed.
 */
async function fitRoom(ctx: BrokerContext, client: pg.PoolClient, runs: { row: DueRow; items: AllocatorItem[]; fire: Date[]; advance: Advance }[], out: PassResult): Promise<void> {
  const bounded = await queueMaxSizes(ctx, runs.map((r) => r.row.queue_name));
  if (bounded.size === 0) return;
  const { rows } = await client.query<{ queue: string; max_size: string; pending: string }>('select * from queen.log_queue_room_v1($1::text[])', [[...bounded.keys()]]);
  const room = new Map(rows.map((r) => [r.queue, Math.max(Number(r.max_size) - Number(r.pending), 0)] as const));
  for (const run of runs) {
    const left = room.get(run.row.queue_name);
    if (left === undefined || run.items.length <= left) {
      if (left !== undefined) room.set(run.row.queue_name, left - run.items.length);
      continue;
    }
    out.waiting += run.items.length - left;
    run.advance.next = run.fire[left]!;
    run.advance.last = left > 0 ? run.fire[left - 1]! : null;
    run.advance.waiting = true;
    run.items = run.items.slice(0, left);
    room.set(run.row.queue_name, 0);
  }
}

/** One fire pass in one transaction on `client`. */
async function firePass(ctx: BrokerContext, client: pg.PoolClient): Promise<PassResult> {
  const { rows } = await client.query<DueRow>(
    `select name, cron, time_zone, queue_name, partition_name, payload, missed, next_fire_at, producer_sub, room_wait_since,
            clock_timestamp() as now
       from queen.schedules
      where next_fire_at <= clock_timestamp()
      order by next_fire_at, name
      limit $1
        for update skip locked`,
    [CLAIM_BATCH],
  );
  const out: PassResult = { fired: 0, advanced: 0, held: 0, waiting: 0, full: rows.length === CLAIM_BATCH, targets: [], written: [] };
  const runs: { row: DueRow; items: AllocatorItem[]; fire: Date[]; advance: Advance }[] = [];
  const advance: Advance[] = [];
  for (const row of rows) {
    try {
      // A schedule that waited for room: every fire time since next_fire_at is still on time.
      const misfireMs = row.room_wait_since ? Math.max(ctx.config.scheduleMisfireMs, row.now.getTime() - row.next_fire_at.getTime()) : ctx.config.scheduleMisfireMs;
      const due = dueFires(clockOf(row.cron, row.time_zone), row.next_fire_at, row.now, row.missed, misfireMs);
      if (due.dropped > 0) {
        ctx.log.warn({ schedule: row.name, missed: row.missed, dropped: due.dropped, since: row.next_fire_at.toISOString() }, 'schedule: missed fire times not pushed (policy)');
      }
      const items = due.fire.map((t) => ({ queue: row.queue_name, partition: row.partition_name, payload: row.payload, transactionId: scheduleTransactionId(row.name, t) }));
      // Partitions are cached after the first fire (created in their own short transaction otherwise, PROTOCOL §4).
      const a: Advance = { name: row.name, next: due.next, last: due.fire.at(-1) ?? null, waiting: false };
      if (items.length) runs.push({ row, items: await allocatorItems(ctx, items), fire: due.fire, advance: a });
      advance.push(a);
    } catch (err) {
      // One schedule's trouble (an encrypted queue without the key here, a
      // zone this platform lost) holds that schedule, never the others.
      out.held++;
      ctx.log.warn({ err, schedule: row.name }, 'schedule: fire held (left due)');
    }
  }
  await fitRoom(ctx, client, runs, out);
  // Append locks in ascending partition id, the order every multi-partition writer takes (PROTOCOL §4).
  runs.sort((a, b) => (a.items[0]!.partition_id < b.items[0]!.partition_id ? -1 : a.items[0]!.partition_id > b.items[0]!.partition_id ? 1 : 0));
  for (const { row, items } of runs) {
    if (items.length === 0) continue;
    const { rows: results } = await client.query<AllocatorResult>(...appendStatement(items, row.producer_sub));
    const queued = results.filter((r) => r.status === 'queued').length;
    out.fired += queued;
    out.targets.push({ queue: row.queue_name, partition: row.partition_name });
    out.written.push(items[0]!.partition_id);
    if (queued) {
      ctx.metrics.pushed.inc({ queue: row.queue_name }, queued);
      ctx.metrics.history.add(row.queue_name, '', 'pushed', queued);
    }
    if (results.length - queued) ctx.metrics.duplicates.inc({ queue: row.queue_name }, results.length - queued);
  }
  if (advance.length) {
    await client.query(
      `update queen.schedules s set next_fire_at = x.next, last_fire_at = coalesce(x.last, s.last_fire_at),
              room_wait_since = case when x.waiting then coalesce(s.room_wait_since, clock_timestamp()) end
         from unnest($1::text[], $2::timestamptz[], $3::timestamptz[], $4::boolean[]) as x(name, next, last, waiting)
        where s.name = x.name`,
      [advance.map((a) => a.name), advance.map((a) => a.next), advance.map((a) => a.last), advance.map((a) => a.waiting)],
    );
  }
  out.advanced = advance.length;
  return out;
}

/**
 * Fires every schedule due now (passes until a batch comes back short);
 * answers how many messages were appended. Brokers running it at once share
 * the due set (SKIP LOCKED) and never push one fire time twice.
 */
export async function fireDueSchedules(ctx: BrokerContext): Promise<{ fired: number; held: number; waiting: number }> {
  let fired = 0;
  let held = 0;
  let waiting = 0;
  for (let round = 0; round < 100; round++) {
    const r = await ctx.partitions.retrying(() => ctx.db.transaction((client) => firePass(ctx, client)));
    fired += r.fired;
    held += r.held;
    waiting += r.waiting;
    if (r.waiting) ctx.metrics.firesWaitingForRoom.inc({ source: 'schedule' }, r.waiting);
    // Committed: parked pops of the targets wake here and, through the allocator's NOTIFY, on every other broker.
    ctx.totals.touch(r.written);
    for (const [queue, partitions] of partitionsByQueue(r.targets)) ctx.notifier.notify(queue, partitions);
    if (r.fired) ctx.metrics.schedulesFired.inc(r.fired);
    if (!r.full) break;
  }
  return { fired, held, waiting };
}

/** Milliseconds until the earliest next_fire_at on the database's clock (null: no schedule). */
async function untilNextFire(ctx: BrokerContext): Promise<number | null> {
  const { rows } = await ctx.db.query<{ ms: number | null }>(
    'select (extract(epoch from (min(next_fire_at) - clock_timestamp())) * 1000)::float8 as ms from queen.schedules',
  );
  return rows[0]!.ms;
}

/**
 * The schedule firer service (started on every broker). Between passes it
 * sleeps until the earliest next_fire_at, at most QUEEN_SCHEDULE_MAX_SLEEP_MS
 * (so a schedule created through another broker is seen within that bound),
 * and wakes at once when this broker creates or replaces a schedule. Stops
 * after the pass in flight.
 */
export function scheduleService(ctx: BrokerContext): { stop(): Promise<void> } {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let wakeSleep: (() => void) | undefined;
  let woken = false;
  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      if (woken || stopped) return resolve();
      wakeSleep = resolve;
      timer = setTimeout(resolve, ms);
      timer.unref();
    }).finally(() => {
      clearTimeout(timer);
      wakeSleep = undefined;
    });
  ctx.schedules.wake = () => {
    woken = true;
    wakeSleep?.();
  };

  const maxSleep = Math.max(ctx.config.scheduleMaxSleepMs, 10);
  const loop = async () => {
    let retryAfter = 0;
    while (!stopped && !ctx.shutdown.aborted) {
      woken = false;
      let wait = maxSleep;
      // While PostgreSQL is down the Database probes for it (and logged the outage once).
      if (ctx.db.available) {
        try {
          const until = await untilNextFire(ctx);
          if (until !== null && until <= 0 && retryAfter <= Date.now()) {
            const r = await fireDueSchedules(ctx);
            if (r.fired) ctx.log.debug({ fired: r.fired }, 'schedules fired');
            // Held or waiting for room: tried again after RETRY_MS, not in a tight loop.
            retryAfter = r.held || r.waiting ? Date.now() + RETRY_MS : 0;
            continue;
          }
          if (until !== null) wait = Math.min(maxSleep, Math.max(until <= 0 ? retryAfter - Date.now() : Math.ceil(until), 1));
        } catch (err) {
          if (!isOutage(err)) ctx.log.warn({ err }, 'schedule fire pass failed');
          wait = RETRY_MS;
        }
      }
      await sleep(wait);
    }
  };
  const running = loop();
  return {
    async stop() {
      stopped = true;
      wakeSleep?.();
      await running;
    },
  };
}
