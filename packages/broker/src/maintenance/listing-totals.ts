import type { Logger } from 'pino';
import { QueenError } from '@queen-mq/protocol';
import type { ListingTotals } from '../context/context.js';
import type { Database, NamedStatement } from '../db/database.js';

/** Partitions per recount statement: one statement holds the recount lock for what it counts. */
const PARTITIONS_PER_RECOUNT = 5_000;
/** Queues counted whole (no totals yet) per statement. */
const QUEUES_PER_RECOUNT = 200;
/** Partitions of queues recounted in the background (below) per pass, at most: the rest waits for the next passes. */
const BACKGROUND_PER_PASS = 1_000;
/** A listing recounts this broker's pending partitions first when there are at most this many. */
const SETTLE_MAX_PARTITIONS = 2_000;
/** The recount takes at most about 1/DUTY of the time: after one that took t ms, the next waits DUTY × t. */
const DUTY = 5;
/** A queue a group pops from through this broker is recounted whole in the background this often at most (and on the first pop). */
const GROUP_RECOUNT_MS = 10 * 60_000;
/** Longest wait between two looks at a partition whose lease is still live (the waits double from the interval). */
const LEASE_RECHECK_MAX_MS = 60_000;

const RECOUNT_SQL: NamedStatement = { name: 'queen_listing_totals_refresh', text: 'select id from queen.listing_totals_refresh_v1($1::uuid[], $2::text[]) id' };

/** Every partition of the named queues, and those their totals still count (deleted since). */
const QUEUE_PARTITIONS_SQL = `select p.id from queen.partitions p join queen.queues q on q.id = p.queue_id where q.name = any($1::text[])
  union select t.partition_id from queen.partition_tallies t join queen.queues q on q.id = t.queue_id where q.name = any($1::text[])`;

/**
 * The listing totals this broker keeps current (migration 029,
 * queen.listing_totals_refresh_v1): the routes that write name the
 * partitions they wrote after their transaction committed (`touch`), and a
 * recount of those partitions runs `intervalMs` later, off the request's
 * path, as one statement per few thousand partitions. Nothing runs while
 * nothing is written: the timer is armed by a write, never periodic.
 *
 * What the listings show is so at most `intervalMs` (QUEEN_LISTING_TOTALS_MS)
 * behind the writes of every broker, longer only while recounts take more
 * than 1/DUTY of the time (the next one waits DUTY times as long as the
 * last). A listing on this broker first recounts what this broker wrote
 * when that is small (`settle`), so one broker reads its own writes.
 *
 * Three changes are not named by partition, and are looked at otherwise:
 * - a lease still live after a recount: the ack that ends it may come from
 *   outside the broker's routes (@queen-mq/pg), so the partition is
 *   recounted again after the interval, then after twice as long, up to
 *   LEASE_RECHECK_MAX_MS, while the lease lives;
 * - a queue changed as a whole (a partition deleted by cleanup) or by a pop
 *   that made cursors on partitions it delivered nothing from (a group's
 *   first pop of a queue): every partition of it is recounted, in the
 *   background (BACKGROUND_PER_PASS a pass); a queue a group pops from is so
 *   recounted on its first pop through this broker and then at most every
 *   GROUP_RECOUNT_MS, which also brings in what was changed by SQL;
 * - a queue without totals (made before migration 029, or by SQL) is
 *   counted whole when it is first written or listed.
 * docs/listing-totals.md has the whole account.
 */
export class ListingTotalsKeeper implements ListingTotals {
  private partitions = new Set<string>();
  /** Partitions of queues recounted whole, a slice a pass. */
  private background = new Set<string>();
  /** Queues to recount whole, expanded into `background` by the next pass. */
  private queues = new Set<string>();
  /** Queues without totals, counted whole by the SQL function. */
  private uncounted = new Set<string>();
  /** Partitions whose lease was live at their last recount: when to look again, and the wait before that. */
  private leased = new Map<string, { due: number; waitMs: number }>();
  /** When this broker last had a (queue, group) recounted whole for a pop (`queue\0group`). */
  private popsSeen = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | null = null;
  private lastMs = 0;
  private stopped = false;

  constructor(
    private readonly db: Database,
    private readonly log: Logger,
    private readonly intervalMs: number,
  ) {}

  /** Partitions written (committed): their shares are recounted soon. */
  touch(partitionIds: Iterable<string | null | undefined>): void {
    for (const id of partitionIds) if (id) this.partitions.add(id);
    if (this.partitions.size) this.arm();
  }

  /** Queues changed in ways not named by partition: each of their partitions recounted, in the background. */
  touchQueues(names: Iterable<string>): void {
    for (const name of names) this.queues.add(name);
    if (this.queues.size) this.arm();
  }

  /**
   * A pop of `queue` by `group` went through this broker: the pop makes the
   * group's missing cursors on every partition of the queue, most of which
   * it delivers nothing from, so the queue is recounted whole on the first
   * such pop and then at most every GROUP_RECOUNT_MS.
   */
  notePop(queue: string, group: string): void {
    const key = `${queue}\u0000${group}`;
    const now = Date.now();
    const last = this.popsSeen.get(key);
    if (last !== undefined && now - last < GROUP_RECOUNT_MS) return;
    if (last === undefined && this.popsSeen.size >= 100_000) this.forgetOldPops(now);
    this.popsSeen.set(key, now);
    this.touchQueues([queue]);
  }

  /** The group's cursors were deleted (on `queue`, or everywhere): its next pop makes them again. */
  groupDeleted(group: string, queue: string | null): void {
    for (const key of this.popsSeen.keys()) {
      const [q, g] = key.split('\u0000');
      if (g === group && (queue === null || q === queue)) this.popsSeen.delete(key);
    }
  }

  /** What waits for a recount: partitions written, partitions of queues recounted whole, queues, leases watched. */
  get pending(): { partitions: number; background: number; queues: number; leased: number } {
    return { partitions: this.partitions.size, background: this.background.size, queues: this.queues.size + this.uncounted.size, leased: this.leased.size };
  }

  /**
   * Before a listing answers: waits for a recount in flight, then recounts
   * this broker's written partitions now when there are at most
   * SETTLE_MAX_PARTITIONS (the background and the leases are left to the
   * timer). A failure is logged: the listing still answers.
   */
  async settle(): Promise<void> {
    if (this.running) await this.running;
    if (this.partitions.size === 0 || this.partitions.size > SETTLE_MAX_PARTITIONS) return;
    await this.run('written');
  }

  /** Queues without totals (found at start-up): counted whole by the next pass. */
  addUncounted(queues: Iterable<string>): void {
    for (const q of queues) this.uncounted.add(q);
    if (this.uncounted.size) this.arm();
  }

  /** Counts `queues` whole now (a page found them without totals), after a recount in flight. */
  async countUncounted(queues: string[]): Promise<void> {
    for (const q of queues) this.uncounted.add(q);
    if (this.running) await this.running;
    await this.run('written');
  }

  /** Recounts everything pending now, the background included; a watched lease only when its look is due. */
  async flush(): Promise<void> {
    if (this.running) await this.running;
    await this.run('all');
  }

  /** Stops the timer and recounts what was written (no other broker would count it). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.running) await this.running;
    await this.run('written');
  }

  private arm(): void {
    if (this.timer || this.stopped) return;
    let wait: number;
    if (this.partitions.size || this.background.size || this.queues.size || this.uncounted.size) {
      wait = Math.max(this.intervalMs, DUTY * this.lastMs);
    } else if (this.leased.size) {
      let due = Infinity;
      for (const l of this.leased.values()) due = Math.min(due, l.due);
      wait = Math.max(due - Date.now(), DUTY * this.lastMs, 10);
    } else return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void (this.running ?? Promise.resolve()).then(() => this.run('timer')).finally(() => this.arm());
    }, wait);
    this.timer.unref();
  }

  /** One pass (`written`: the written partitions and uncounted queues only; `timer`: a slice of the background too, and the leases due; `all`: the whole background); concurrent callers share it. */
  private run(scope: 'written' | 'timer' | 'all'): Promise<void> {
    if (this.running) return this.running;
    const started = Date.now();
    this.running = this.pass(scope)
      .catch((err: unknown) => {
        // An outage is logged once, by the Database; what was pending waits for it to end.
        if (!(err instanceof QueenError && err.code === 'DB_UNAVAILABLE')) this.log.warn({ err }, 'listing totals not recounted; tried again later');
      })
      .finally(() => {
        this.lastMs = Date.now() - started;
        this.running = null;
      });
    return this.running;
  }

  private async pass(scope: 'written' | 'timer' | 'all'): Promise<void> {
    const started = Date.now();
    const uncounted = [...this.uncounted];
    this.uncounted.clear();
    while (uncounted.length) {
      const batch = uncounted.slice(0, QUEUES_PER_RECOUNT);
      try {
        await this.db.query(RECOUNT_SQL, [[], batch]);
      } catch (err) {
        for (const q of uncounted) this.uncounted.add(q);
        throw err;
      }
      uncounted.splice(0, batch.length);
    }
    if (scope !== 'written' && this.queues.size) {
      const queues = [...this.queues];
      this.queues.clear();
      try {
        const { rows } = await this.db.query<{ id: string }>(QUEUE_PARTITIONS_SQL, [queues]);
        for (const r of rows) this.background.add(r.id);
      } catch (err) {
        for (const q of queues) this.queues.add(q);
        throw err;
      }
    }
    const ids = new Set(this.partitions);
    this.partitions.clear();
    if (scope !== 'written') {
      let n = 0;
      for (const id of this.background) {
        if (scope === 'timer' && n++ >= BACKGROUND_PER_PASS) break;
        ids.add(id);
        this.background.delete(id);
      }
      const now = Date.now();
      for (const [id, l] of this.leased) if (l.due <= now) ids.add(id);
    }
    const todo = [...ids];
    const leased = new Set<string>();
    try {
      while (todo.length) {
        const batch = todo.slice(0, PARTITIONS_PER_RECOUNT);
        const { rows } = await this.db.query<{ id: string }>(RECOUNT_SQL, [batch, []]);
        for (const r of rows) leased.add(r.id);
        todo.splice(0, batch.length);
      }
    } catch (err) {
      // What was not recounted waits for the next pass.
      for (const id of todo) this.partitions.add(id);
      throw err;
    } finally {
      this.watchLeases(ids, todo, leased);
    }
    this.log.debug({ partitions: ids.size, uncounted: uncounted.length, leased: leased.size, ms: Date.now() - started }, 'listing totals recounted');
  }

  /** After a pass: the recounted partitions still leased are looked at again later, the others no more. */
  private watchLeases(recounted: Set<string>, notDone: string[], leased: Set<string>): void {
    const skipped = new Set(notDone);
    const now = Date.now();
    for (const id of recounted) {
      if (skipped.has(id)) continue;
      if (!leased.has(id)) {
        this.leased.delete(id);
        continue;
      }
      const before = this.leased.get(id);
      const waitMs = before ? Math.min(2 * before.waitMs, LEASE_RECHECK_MAX_MS) : this.intervalMs;
      this.leased.set(id, { due: now + waitMs, waitMs });
    }
  }

  private forgetOldPops(now: number): void {
    for (const [key, at] of this.popsSeen) if (now - at >= GROUP_RECOUNT_MS) this.popsSeen.delete(key);
  }
}

/** Queues that have no totals yet (made before migration 029, or by SQL): one pass over the queues, at start-up. */
export async function uncountedQueues(db: Database): Promise<string[]> {
  const { rows } = await db.query<{ name: string }>(
    'select q.name from queen.queues q where not exists (select 1 from queen.queue_totals t where t.queue_id = q.id)',
  );
  return rows.map((r) => r.name);
}

/**
 * A listing's rows read with the totals current (`settle`); `read` marks the
 * queues it found without totals (`uncounted`: made by SQL, or not counted
 * yet), which are counted whole and the page read again.
 */
export async function readWithTotals<R extends { name: string; uncounted: boolean }>(totals: ListingTotals, read: () => Promise<R[]>): Promise<R[]> {
  await totals.settle();
  const rows = await read();
  const missing = rows.filter((r) => r.uncounted).map((r) => r.name);
  if (missing.length === 0) return rows;
  await totals.countUncounted(missing);
  return read();
}
