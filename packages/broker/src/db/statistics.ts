import type { Logger } from 'pino';
import type { Database } from './database.js';

/** Tables whose row counts follow the number of partitions clients create. */
const GROWING_TABLES = ['queues', 'partitions', 'log_segments', 'cursors', 'queue_totals', 'group_totals', 'partition_tallies', 'cursor_tallies'] as const;

/** Partitions this broker creates between two looks at the statistics. */
export const CREATED_PER_CHECK = 1_000;

/**
 * Keeps the planner's row counts of the partition tables current while
 * clients create partitions. Autovacuum analyzes a fresh
 * database while these tables hold a few rows on one page; plans made then
 * (a connection keeps each statement's plan until the statistics change)
 * scan tables or whole indexes that suit a few rows, and a join over a
 * push's new partitions probed all of them once per target: a push creating
 * 500 partitions ran over 40 s at 20,000 partitions. The next autovacuum
 * analyze can be minutes away.
 *
 * After every CREATED_PER_CHECK partitions this broker created, one query
 * compares each table's size on disk with the size its statistics were
 * taken at (pages: known at once, unlike the cumulative row counts, which
 * lag), and ANALYZEs those that more than doubled (and grew by over 16
 * pages): new statistics make every connection plan those statements again. Doubling
 * keeps the work logarithmic in the tables' growth; nothing runs while no
 * partition is created. One check at a time, off the request's path; a
 * failure is logged and the next check tries again.
 */
export class StatisticsKeeper {
  private created = 0;
  private running: Promise<void> | null = null;

  constructor(
    private readonly db: Database,
    private readonly log: Logger,
  ) {}

  /** Counts `n` partitions created; starts a check each CREATED_PER_CHECK. */
  noteCreated(n: number): void {
    this.created += n;
    if (this.created < CREATED_PER_CHECK || this.running) return;
    this.created = 0;
    this.running = this.check()
      .then(() => undefined)
      .catch((err: unknown) => this.log.warn({ err }, 'partition table statistics not refreshed'))
      .finally(() => {
        this.running = null;
      });
  }

  /** The check in flight, if any (tests wait for it). */
  get pending(): Promise<void> | null {
    return this.running;
  }

  /** Analyzes the growing tables now over twice the size their statistics were taken at. Answers their names. */
  async check(): Promise<string[]> {
    const { rows } = await this.db.query<{ name: string }>(
      `select c.relname as name
         from pg_class c
        where c.relnamespace = 'queen'::regnamespace and c.relname = any($1::text[])
          and pg_relation_size(c.oid) / current_setting('block_size')::int > 2 * c.relpages + 16`,
      [GROWING_TABLES],
    );
    if (rows.length === 0) return [];
    const started = Date.now();
    await this.db.query(`analyze ${rows.map((r) => `queen.${r.name}`).join(', ')}`);
    this.log.info({ tables: rows.map((r) => r.name), ms: Date.now() - started }, 'partition table statistics refreshed');
    return rows.map((r) => r.name);
  }
}
