import pg from 'pg';
import { QueenError } from '@queen-mq/protocol';
import type { BrokerConfig } from './config.js';

// int8 stays a string (offsets are decimal strings on the wire); timestamps are
// formatted by queen.iso() in SQL, so no Date conversion is needed here.

/** SQLSTATE classes and socket errors that mean "PostgreSQL is not there". */
function isUnavailable(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  if (typeof e?.code === 'string') {
    if (/^(08|57P0[1-3]|53300)/.test(e.code)) return true;
    if (['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH'].includes(e.code)) return true;
  }
  const m = e?.message ?? '';
  return /timeout exceeded when trying to connect|Connection terminated|connect ECONNREFUSED|Client has encountered a connection error/i.test(m);
}

/** A statement PostgreSQL parses and plans once per connection. */
export interface NamedStatement {
  name: string;
  text: string;
}

/**
 * The pool plus the last observation of whether PostgreSQL answered, which
 * `/health` reports without a round trip of its own.
 */
export class Database {
  readonly pool: pg.Pool;
  connected = false;

  constructor(readonly url: string, config: Pick<BrokerConfig, 'poolSize' | 'segmentMaxMessages' | 'segmentMaxAgeS'>) {
    this.pool = new pg.Pool({
      connectionString: url,
      max: config.poolSize,
      connectionTimeoutMillis: 5000,
      idleTimeoutMillis: 30000,
      options: `-c queen.segment_max_messages=${config.segmentMaxMessages} -c queen.segment_max_age_s=${config.segmentMaxAgeS}`,
    });
    // An idle client losing its connection must not crash the process.
    this.pool.on('error', () => {
      this.connected = false;
    });
  }

  /**
   * One statement; a connection failure becomes DB_UNAVAILABLE (nothing
   * applied). A named statement (`{name, text}`) is parsed once per
   * connection: for the hot paths.
   */
  async query<R extends pg.QueryResultRow = Record<string, unknown>>(text: string | NamedStatement, values?: unknown[]): Promise<pg.QueryResult<R>> {
    try {
      const result = typeof text === 'string' ? await this.pool.query<R>(text, values) : await this.pool.query<R>({ ...text, values });
      this.connected = true;
      return result;
    } catch (err) {
      throw this.translate(err);
    }
  }

  /** Runs fn inside BEGIN/COMMIT on one client; rolls back on any throw. */
  async transaction<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (err) {
      throw this.translate(err);
    }
    try {
      await client.query('begin');
      const out = await fn(client);
      await client.query('commit');
      this.connected = true;
      return out;
    } catch (err) {
      await client.query('rollback').catch(() => undefined);
      throw this.translate(err);
    } finally {
      client.release();
    }
  }

  translate(err: unknown): unknown {
    if (err instanceof QueenError) return err;
    if (isUnavailable(err)) {
      this.connected = false;
      return new QueenError('DB_UNAVAILABLE', undefined, { cause: err });
    }
    return err;
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}
