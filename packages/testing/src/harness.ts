import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { pino } from 'pino';
import { startBroker, type BrokerOptions, type RunningBroker } from '@queen-mq/broker';
import { acquireCluster, providedCluster, type ClusterSource } from './cluster.js';
import { installVirtualClock, VirtualClock } from './virtual-clock.js';

/**
 * A fresh database; answers its URL. On `adminUrl`'s cluster, else on the
 * run's (the vitest globalSetup's, else DATABASE_URL's): without either it
 * throws, since nothing would keep an embedded cluster alive after the call
 * (startTestBroker() starts one of its own).
 */
export async function freshDatabase(adminUrl?: string): Promise<string> {
  const admin = adminUrl ?? (await providedCluster())?.adminUrl;
  if (!admin) throw new Error('freshDatabase() needs an admin URL, the vitest globalSetup (@queen-mq/testing/global-setup) or DATABASE_URL');
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
  /** The database's virtual clock, when started with `virtualClock`. */
  clock?: VirtualClock;
  /** Where the PostgreSQL came from (see {@link startTestBroker}). */
  cluster: ClusterSource | 'databaseUrl';
  /** Stops the broker, and the embedded PostgreSQL when this was its last user. */
  stop(): Promise<void>;
}

/** Options of {@link startTestBroker}: the broker's own, plus where its database comes from. */
export interface TestBrokerOptions extends BrokerOptions {
  /** An existing database (a second replica on the same data); default a fresh one. */
  databaseUrl?: string;
  /**
   * Runs the fresh database on a virtual clock starting at this instant (epoch
   * ms, Date or ISO string; `true` = now): `createdAt`, leases and timers
   * follow `broker.clock`, which moves only when told to. See virtual-clock.ts.
   */
  virtualClock?: boolean | number | string | Date;
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
 * A real broker over real HTTP on a fresh database, for a test file. The
 * PostgreSQL is, in order: the vitest globalSetup's
 * (`@queen-mq/testing/global-setup`), `DATABASE_URL`, or an embedded one this
 * process starts (a few seconds the first time) and stops with the last
 * broker. Pass `databaseUrl` to put a second broker on the same database
 * (multi-replica scenarios), `virtualClock` to control the broker's time.
 */
export async function startTestBroker(options: TestBrokerOptions = {}): Promise<TestBroker> {
  const { databaseUrl: given, virtualClock, ...brokerOptions } = options;
  if (given && virtualClock !== undefined && virtualClock !== false) throw new Error('startTestBroker: virtualClock needs a fresh database, not databaseUrl');
  const cluster = given ? undefined : await acquireCluster();
  try {
    const databaseUrl = given ?? (await freshDatabase(cluster!.adminUrl));
    let startMs: number | undefined;
    if (virtualClock !== undefined && virtualClock !== false) {
      startMs = virtualClock === true ? Date.now() : typeof virtualClock === 'number' ? virtualClock : typeof virtualClock === 'string' ? Date.parse(virtualClock) : virtualClock.getTime();
      if (!Number.isFinite(startMs)) throw new Error(`startTestBroker: virtualClock is not a time: ${String(virtualClock)}`);
      await installVirtualClock(databaseUrl, startMs);
    }
    const broker = await startBroker({
      ...brokerOptions,
      logger: brokerOptions.logger ?? pino({ level: process.env.QUEEN_TEST_LOG ?? 'silent' }),
      config: { port: 0, host: '127.0.0.1', retentionIntervalMs: 600000, ...brokerOptions.config, databaseUrl },
    });
    const sql = new pg.Pool({ connectionString: databaseUrl, max: 4 });
    // pg-pool's end() resolves before its idle clients' sockets have closed;
    // PostgreSQL stopped right after (stop() releases the cluster) can end
    // such a session first, and an 'error' with no listener on the pool
    // ends the test process.
    sql.on('error', () => undefined);
    let stopping: Promise<void> | undefined;
    return {
      ...broker,
      sql,
      http: (method, path, body, headers) => requestJson(broker.url, method, path, body, headers),
      ...(startMs !== undefined ? { clock: new VirtualClock(sql, startMs) } : {}),
      cluster: cluster?.source ?? 'databaseUrl',
      stop: () =>
        (stopping ??= (async () => {
          try {
            await sql.end();
            await broker.close();
          } finally {
            await cluster?.release();
          }
        })()),
    };
  } catch (err) {
    await cluster?.release();
    throw err;
  }
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
