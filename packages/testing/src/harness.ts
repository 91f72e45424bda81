import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { pino } from 'pino';
import { inject } from 'vitest';
import { startBroker, type BrokerOptions, type RunningBroker } from '@queen-mq/broker';

/** A fresh database on the suite's cluster; answers its URL. */
export async function freshDatabase(): Promise<string> {
  const admin = inject('queenAdminUrl');
  const name = `t_${randomBytes(6).toString('hex')}`;
  const client = new pg.Client({ connectionString: admin });
  await client.connect();
  try {
    await client.query(`create database ${name}`);
  } finally {
    await client.end();
  }
  const url = new URL(admin);
  url.pathname = `/${name}`;
  return url.toString();
}

export interface TestBroker extends RunningBroker {
  /** A direct connection for `sql:` checks. */
  sql: pg.Pool;
  /** JSON request against the broker; never throws on a non-2xx. */
  http<T = any>(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<{ status: number; body: T; headers: Headers }>;
  stop(): Promise<void>;
}

export async function requestJson(base: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(base + path, {
    method,
    headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    /* plain text (metrics) */
  }
  return { status: res.status, body: parsed as any, headers: res.headers };
}

/**
 * A real broker over real HTTP on a fresh database. Pass `databaseUrl` to put
 * a second broker on the same database (multi-replica scenarios).
 */
export async function startTestBroker(options: BrokerOptions & { databaseUrl?: string } = {}): Promise<TestBroker> {
  const databaseUrl = options.databaseUrl ?? (await freshDatabase());
  const broker = await startBroker({
    ...options,
    logger: options.logger ?? pino({ level: process.env.QUEEN_TEST_LOG ?? 'silent' }),
    config: { port: 0, host: '127.0.0.1', retentionIntervalMs: 600000, ...options.config, databaseUrl },
  });
  const sql = new pg.Pool({ connectionString: databaseUrl, max: 4 });
  return {
    ...broker,
    sql,
    http: (method, path, body, headers) => requestJson(broker.url, method, path, body, headers),
    stop: async () => {
      await sql.end();
      await broker.close();
    },
  };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `fn` until it returns a truthy value or `ms` pass. */
export async function eventually<T>(fn: () => Promise<T | undefined | null | false>, ms = 5000, every = 50): Promise<T> {
  const end = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > end) throw new Error(`condition not met within ${ms} ms${last ? `: ${(last as Error).message}` : ''}`);
    await sleep(every);
  }
}

export function uniqueName(prefix = 'q'): string {
  return `${prefix}-${randomBytes(4).toString('hex')}`;
}
