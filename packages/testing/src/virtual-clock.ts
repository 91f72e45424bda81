import pg from 'pg';

/**
 * The broker has one clock: PostgreSQL's. It stamps `createdAt`
 * (`clock_timestamp()` in the push function), times leases and timers
 * (`now()`), and the stream runner closes processing-time windows on it. A
 * test database made with a virtual clock shadows those two functions with
 * ones that read a stored instant: the schema `queen_test_clock` comes before
 * `pg_catalog` in the database's search_path, so every unqualified `now()`
 * and `clock_timestamp()` of the broker's SQL — column defaults included,
 * since the schema exists before the migrations run — answers the virtual
 * time. Nothing of the broker changes; a database without the schema (every
 * production one) runs on the real clock.
 */
const SCHEMA = 'queen_test_clock';

/** Installs the virtual clock in a fresh, empty database (before the broker migrates it). */
export async function installVirtualClock(databaseUrl: string, startMs: number): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ db: string }>('select current_database() as db');
    await client.query(`
      create schema ${SCHEMA};
      create table ${SCHEMA}.clock (one boolean primary key default true check (one), at timestamptz not null);
      insert into ${SCHEMA}.clock (at) values (timestamptz 'epoch' + ${Math.trunc(startMs)}::bigint * interval '1 millisecond');
      -- frozen between moves: every statement of a step sees the same instant
      create function ${SCHEMA}.now() returns timestamptz language sql stable as $$ select at from ${SCHEMA}.clock $$;
      create function ${SCHEMA}.clock_timestamp() returns timestamptz language sql volatile as $$ select at from ${SCHEMA}.clock $$;
      alter database ${pg.escapeIdentifier(rows[0]!.db)} set search_path = ${SCHEMA}, pg_catalog, "$user", public;
    `);
  } finally {
    await client.end();
  }
}

/**
 * The virtual clock of a test database: `now()` in epoch ms; `set` and
 * `advance` move it for the broker (the next statement of every connection
 * sees it) and for anything that reads {@link VirtualClock.now}. It never
 * goes back.
 */
export class VirtualClock {
  private current: number;

  constructor(
    private readonly sql: pg.Pool,
    startMs: number,
  ) {
    this.current = startMs;
  }

  /** The virtual time, epoch ms. */
  now(): number {
    return this.current;
  }

  /** Moves the clock to `at` (epoch ms, Date or ISO string); throws when that is in the past. */
  async set(at: number | Date | string): Promise<number> {
    const ms = typeof at === 'number' ? at : typeof at === 'string' ? Date.parse(at) : at.getTime();
    if (!Number.isFinite(ms)) throw new Error(`virtual clock: not a time: ${String(at)}`);
    if (ms < this.current) throw new Error(`virtual clock: cannot go back from ${new Date(this.current).toISOString()} to ${new Date(ms).toISOString()}`);
    await this.sql.query(`update ${SCHEMA}.clock set at = timestamptz 'epoch' + $1::bigint * interval '1 millisecond'`, [Math.trunc(ms)]);
    this.current = ms;
    return ms;
  }

  /** Moves the clock forward by `ms`. */
  advance(ms: number): Promise<number> {
    if (!Number.isFinite(ms) || ms < 0) throw new Error(`virtual clock: advance takes a non-negative number of ms, got ${ms}`);
    return this.set(this.current + ms);
  }
}
