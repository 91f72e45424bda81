import { EventEmitter } from 'node:events';
import pg from 'pg';
import type { Logger } from 'pino';
import { QueenError } from '@queen-mq/protocol';
import { PrimaryRouter } from './primary.js';

// int8 stays a string (offsets are decimal strings on the wire); timestamps are
// formatted by queen.iso() in SQL, so no Date conversion is needed here.

/** SQLSTATE classes and socket errors that mean "PostgreSQL is not there". */
export function isUnavailable(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  if (typeof e?.code === 'string') {
    if (/^(08|57P0[1-3]|53300|25006)/.test(e.code)) return true;
    if (['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH'].includes(e.code)) return true;
  }
  const m = e?.message ?? '';
  return /timeout exceeded when trying to connect|Connection terminated|connect ECONNREFUSED|Client has encountered a connection error|Client was closed and is not queryable/i.test(m);
}

/**
 * A 503 of the database's: DB_UNAVAILABLE (nothing applied) or
 * DB_OUTCOME_UNKNOWN (the session died during a commit). Background passes
 * skip these quietly; the outage is logged once by the Database.
 */
export function isOutage(err: unknown): boolean {
  return err instanceof QueenError && (err.code === 'DB_UNAVAILABLE' || err.code === 'DB_OUTCOME_UNKNOWN');
}

/** 57014 query_canceled: our statement_timeout cut a statement; PostgreSQL itself is fine. */
function isStatementTimeout(err: unknown): boolean {
  return (err as { code?: string })?.code === '57014';
}

/** A statement PostgreSQL parses and plans once per connection. */
export interface NamedStatement {
  name: string;
  text: string;
}

/** Delays of the probe that looks for PostgreSQL while it is down: short, so service resumes within about a second. */
const PROBE_FIRST_MS = 100;
const PROBE_MAX_MS = 1000;

/** What the pool needs from the broker settings (BrokerConfig has each field under the same name). */
interface DatabaseConfig {
  /** Connections in the pool. */
  poolSize: number;
  /** Where a partition's open segment closes, set on every session (queen.segment_max_*). */
  segmentMaxMessages: number;
  segmentMaxAgeS: number;
  /** A statement's longest run, 0 = none. Default 30000 ms. */
  statementTimeoutMs?: number;
  /** How long a request waits for a pool connection. Default 5000 ms. */
  poolWaitMs?: number;
}

/**
 * The pool plus the one place that knows whether PostgreSQL is up. Any
 * statement failing for lack of a database marks it down (logged once); a
 * probe then looks for it with a short backoff and marks it up again (logged
 * once), as does any new connection PostgreSQL accepts meanwhile. Not a
 * statement that succeeds meanwhile: while PostgreSQL shuts down it ends its
 * sessions one by one, so a statement can still succeed on a session not
 * yet ended, and the outage was logged as over within moments of its start, then
 * again as begun (a shutting-down server refuses new connections, so a
 * connection accepted is proof). Background services
 * consult `available` and skip their passes while it is false; `/health`
 * reports it without a round trip of its own. Events: `down` (err), `up`.
 */
export class Database extends EventEmitter {
  readonly pool: pg.Pool;
  /** Which server sessions go to (the writable one of a multi-host URL). */
  readonly router: PrimaryRouter;
  /** The Client class of the pool: other sessions (LISTEN) follow the primary with it. */
  readonly Client: typeof pg.Client;
  private up = false;
  private downSince = 0;
  private probeTimer?: NodeJS.Timeout;
  private probeDelay = PROBE_FIRST_MS;
  private closed = false;
  /** Bumped by every recovery: a statement that started before it and fails after it belongs to the outage that ended. */
  private recoveries = 0;

  private readonly poolSize: number;

  constructor(readonly url: string, config: DatabaseConfig, private readonly log?: Logger) {
    super();
    this.poolSize = config.poolSize;
    const statementTimeoutMs = config.statementTimeoutMs ?? 30000;
    this.router = new PrimaryRouter(url);
    this.Client = this.router.clientClass();
    this.router.onFailover = (e) => this.log?.warn({ from: e.from, to: e.to, durationMs: e.durationMs }, 'database failover: the broker follows the new primary');
    this.pool = new pg.Pool({
      Client: this.Client,
      connectionString: this.router.baseUrl,
      max: config.poolSize,
      connectionTimeoutMillis: config.poolWaitMs ?? 5000,
      idleTimeoutMillis: 30000,
      // A peer that vanished without a FIN (host down, cable cut) is noticed by
      // the kernel's keepalive probes instead of never.
      keepAlive: true,
      keepAliveInitialDelayMillis: 10000,
      // statement_timeout bounds every ordinary statement on the server. A
      // long-poll pop is not one long statement: it waits in JS between short
      // claim attempts (pop.ts), so the bound never cuts it. Maintenance and
      // migrations lift it for their own transactions.
      options:
        `-c queen.segment_max_messages=${config.segmentMaxMessages} -c queen.segment_max_age_s=${config.segmentMaxAgeS}` +
        ` -c statement_timeout=${statementTimeoutMs}`,
    });
    // An idle client losing its connection must not crash the process.
    this.pool.on('error', (err) => this.markDown(err));
    this.pool.on('connect', () => {
      if (!this.up) this.markUp();
    });
  }

  /** False from the first failure for lack of a database until PostgreSQL answers again. */
  get available(): boolean {
    return this.up;
  }

  /** Same as `available`, under the name `/health` reports. */
  get connected(): boolean {
    return this.up;
  }

  set connected(value: boolean) {
    if (value) this.markUp();
    else this.markDown(new Error('reported unreachable'));
  }

  /** PostgreSQL answered: logs once when it comes back after being down. */
  markUp(): void {
    if (this.up || this.closed) return;
    const wasDown = this.downSince > 0;
    this.up = true;
    clearTimeout(this.probeTimer);
    this.probeTimer = undefined;
    this.probeDelay = PROBE_FIRST_MS;
    if (wasDown) {
      this.recoveries++;
      this.log?.info({ downMs: Date.now() - this.downSince }, 'database available again');
      this.downSince = 0;
      this.emit('up');
    }
  }

  /**
   * PostgreSQL could not be reached (callers pass only such errors: socket
   * and session loss, refused connections): logs once per outage and starts
   * the probe.
   */
  markDown(err: unknown): void {
    if (this.closed) return;
    this.router.lost();
    if (this.up) {
      this.up = false;
      this.downSince = Date.now();
      const e = err as { code?: string; message?: string };
      this.log?.warn({ code: e?.code, reason: e?.message }, 'database unavailable; answering 503 DB_UNAVAILABLE until it is back');
      this.emit('down', err);
    }
    this.scheduleProbe();
  }

  private scheduleProbe(): void {
    if (this.probeTimer || this.closed || this.up) return;
    this.probeTimer = setTimeout(() => {
      this.pool.query('select 1').then(
        () => {
          this.probeTimer = undefined;
          this.markUp();
        },
        () => {
          this.probeTimer = undefined;
          this.probeDelay = Math.min(this.probeDelay * 2, PROBE_MAX_MS);
          this.scheduleProbe();
        },
      );
    }, this.probeDelay);
    this.probeTimer.unref();
  }

  /**
   * One statement; a connection that cannot be had becomes DB_UNAVAILABLE
   * (nothing applied), one lost during the statement DB_OUTCOME_UNKNOWN (it
   * commits on its own, so it may have). A named statement (`{name, text}`)
   * is parsed once per connection: for the hot paths.
   */
  async query<R extends pg.QueryResultRow = Record<string, unknown>>(text: string | NamedStatement, values?: unknown[]): Promise<pg.QueryResult<R>> {
    const recoveries = this.recoveries;
    const session = await this.checkout(recoveries);
    try {
      const out = typeof text === 'string' ? await session.client.query<R>(text, values) : await session.client.query<R>({ ...text, values });
      session.release();
      return out;
    } catch (err) {
      session.release(err as Error);
      // It commits on its own: a session lost during it may have committed.
      throw this.translate(session.lost() ?? err, recoveries, 'commit');
    }
  }

  /** Runs fn inside BEGIN/COMMIT on one client; rolls back on any throw. */
  async transaction<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const recoveries = this.recoveries;
    const session = await this.checkout(recoveries);
    const { client } = session;
    let phase: 'work' | 'commit' = 'work';
    let failed: Error | undefined;
    try {
      await client.query('begin');
      const out = await fn(client);
      phase = 'commit';
      await client.query('commit');
      return out;
    } catch (err) {
      // A session PostgreSQL ended, or one on a server that turned read-only, is never pooled again.
      if (!session.lost() && isUnavailable(err)) failed = err as Error;
      if (!session.lost() && !failed) await client.query('rollback').catch(() => undefined);
      throw this.translate(err, recoveries, phase);
    } finally {
      session.release(failed);
    }
  }

  /**
   * A pooled session for one piece of work. A checked-out client has no
   * listener of the pool's: PostgreSQL ending the session (57P01 on a
   * restart) would otherwise be an unhandled 'error' event and take the
   * process down. The statement in flight fails on its own; `release` then
   * discards the session instead of pooling it, as it does when given the
   * error of a session that must not be reused.
   */
  private async checkout(recoveries: number): Promise<{ client: pg.PoolClient; lost: () => Error | undefined; release: (err?: Error) => void }> {
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (err) {
      throw this.translate(err, recoveries);
    }
    let lost: Error | undefined;
    const onError = (err: Error) => {
      lost = err;
      if (recoveries === this.recoveries) this.markDown(err);
    };
    client.on('error', onError);
    return {
      client,
      lost: () => lost,
      release: (err) => {
        client.removeListener('error', onError);
        client.release(lost ?? err);
      },
    };
  }

  /**
   * The error a caller answers. `since`: the recovery count when the failed
   * work started; a failure of work begun before the last recovery (a connect
   * refused while PostgreSQL was down, answered after the probe found it
   * back) is that outage's, and does not open a new one.
   */
  translate(err: unknown, since = this.recoveries, phase: 'work' | 'commit' = 'work'): unknown {
    if (err instanceof QueenError) return err;
    // pg-pool words a wait for a busy pool like a connection that could not
    // be made. With every connection open and at work, PostgreSQL is there:
    // this is back-pressure (a burst wider than the pool), answered 503 like
    // an outage (nothing applied, the client retries) but not logged as one.
    if (this.up && this.pool.totalCount >= this.poolSize && /timeout exceeded when trying to connect/i.test((err as Error)?.message ?? '')) {
      return new QueenError('DB_UNAVAILABLE', 'No database connection came free in time (the pool is busy); nothing was applied', { cause: err });
    }
    if (isUnavailable(err)) {
      if (since === this.recoveries) this.markDown(err);
      // The session died while its COMMIT was on the way: PostgreSQL may have
      // committed it (and, with a synchronous standby, the new primary has it).
      // A read-only refusal (25006) applied nothing.
      const code = (err as { code?: string }).code;
      if (phase === 'commit' && code !== '25006' && code !== '57P03') return new QueenError('DB_OUTCOME_UNKNOWN', undefined, { cause: err });
      return new QueenError('DB_UNAVAILABLE', undefined, { cause: err });
    }
    // The database is up but did not finish in time (overload, a lock held
    // too long): nothing was applied, and a retry later may well succeed.
    if (isStatementTimeout(err)) return new QueenError('DB_UNAVAILABLE', 'Database statement timed out', { cause: err });
    return err;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.probeTimer);
    await this.pool.end();
  }
}
