import type { Logger } from 'pino';
import { QueenError } from '@queen-mq/protocol';
import type { Database, NamedStatement } from './database.js';

/** Partitions per recount statement: one statement holds the recount lock for what it counts. */
const PARTITIONS_PER_RECOUNT = 5_000;
/** Queues recounted whole per statement. */
const QUEUES_PER_RECOUNT = 200;
/** A listing recounts this broker's pending partitions first when there are at most this many. */
const SETTLE_MAX_PARTITIONS = 2_000;
/** The recount takes at most about 1/DUTY of the time: after one that took t ms, the next waits DUTY × t. */
const DUTY = 5;

const RECOUNT_SQL: NamedStatement = { name: 'queen_listing_totals_refresh', text: 'select id from queen.listing_totals_refresh_v1($1::uuid[], $2::text[]) id' };

/**
 * The listing totals this broker keeps current (migration 029,
 * queen.listing_totals_refresh_v1): the routes that write name the
 * partitions they wrote after their transaction committed (`touch`), and a
 * recount of those partitions runs `intervalMs` later, off the request's
 * path, as one statement per few thousand partitions. Nothing runs while
 * nothing is written: the timer is armed by a touch, never periodic.
 *
 * What the listings show is so at most `intervalMs` (QUEEN_LISTING_TOTALS_MS)
 * behind the writes of every broker, longer only while recounts take more
 * than 1/DUTY of the time (the next one waits DUTY times as long as the
 * last). A listing on this broker first recounts what this broker wrote
 * when that is small (`settle`), so one broker reads its own writes.
 * docs/listing-totals.md has the whole account.
 */
export class ListingTotals {
  private partitions = new Set<string>();
  private queues = new Set<string>();
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
    this.arm();
  }

  /** Queues changed in ways not named by partition: recounted whole (their size is what it costs). */
  touchQueues(names: Iterable<string>): void {
    for (const name of names) this.queues.add(name);
    this.arm();
  }

  /** Partitions and queues waiting for their recount. */
  get pending(): { partitions: number; queues: number } {
    return { partitions: this.partitions.size, queues: this.queues.size };
  }

  /**
   * Before a listing answers: waits for a recount in flight, then recounts
   * this broker's pending partitions now when there are at most
   * SETTLE_MAX_PARTITIONS (queues waiting for a whole recount are left to
   * the timer). A failure is logged: the listing still answers.
   */
  async settle(): Promise<void> {
    if (this.running) await this.running;
    if (this.partitions.size === 0 || this.partitions.size > SETTLE_MAX_PARTITIONS) return;
    await this.run(false);
  }

  /** Recounts `queues` whole now (a page found them without totals), after a recount in flight. */
  async recountQueues(queues: string[]): Promise<void> {
    for (const q of queues) this.queues.add(q);
    if (this.running) await this.running;
    await this.run(true);
  }

  /** Recounts everything pending now (tests, shutdown). */
  async flush(): Promise<void> {
    if (this.running) await this.running;
    await this.run(true);
  }

  /** Stops the timer and recounts what is still pending (no other broker would count it). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.flush();
  }

  private arm(): void {
    if (this.timer || this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void (this.running ?? Promise.resolve()).then(() => this.run(true)).finally(() => {
        if (this.partitions.size || this.queues.size) this.arm();
      });
    }, Math.max(this.intervalMs, DUTY * this.lastMs));
    this.timer.unref();
  }

  /** One pass over what is pending (the whole queues too when `whole`); concurrent callers share it. */
  private run(whole: boolean): Promise<void> {
    if (this.running) return this.running;
    const started = Date.now();
    this.running = this.pass(whole)
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

  private async pass(whole: boolean): Promise<void> {
    const partitions = [...this.partitions];
    const queues = whole ? [...this.queues] : [];
    this.partitions.clear();
    if (whole) this.queues.clear();
    const leased: string[] = [];
    try {
      while (queues.length) {
        const batch = queues.slice(0, QUEUES_PER_RECOUNT);
        await this.db.query(RECOUNT_SQL, [[], batch]);
        queues.splice(0, batch.length);
      }
      while (partitions.length) {
        const batch = partitions.slice(0, PARTITIONS_PER_RECOUNT);
        const { rows } = await this.db.query<{ id: string }>(RECOUNT_SQL, [batch, []]);
        partitions.splice(0, batch.length);
        for (const r of rows) leased.push(r.id);
      }
    } catch (err) {
      // What was not recounted waits for the next pass.
      for (const id of partitions) this.partitions.add(id);
      for (const q of queues) this.queues.add(q);
      throw err;
    } finally {
      // A lease still live on a recounted partition: its ack may come from
      // outside this broker's routes, so the partition is looked at again.
      if (leased.length) this.touch(leased);
    }
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
  await totals.recountQueues(missing);
  return read();
}
