import { execFileSync } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allRoutes } from '@queen-mq/protocol';
import { startEmbeddedPostgres } from '@queen-mq/broker';
import { eventually, sleep, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// Operations endpoints (PROTOCOL §5.10): health, readiness, metrics, OpenAPI,
// and how the broker behaves when PostgreSQL goes away.

const warnings: { code?: string; message: string }[] = [];
const onWarning = (w: Error & { code?: string }) => warnings.push({ code: w.code, message: w.message });

let b: TestBroker;
beforeAll(async () => {
  process.on('warning', onWarning);
  b = await startTestBroker();
});
afterAll(async () => {
  process.off('warning', onWarning);
  await b?.stop();
});

/** The value of one series in Prometheus text, or undefined when absent. */
function sample(text: string, series: string): number | undefined {
  for (const line of text.split('\n')) {
    if (line.startsWith(`${series} `)) return Number(line.slice(series.length + 1));
  }
  return undefined;
}

/** Every (METHOD path) fastify serves, rebuilt from its printed route tree (children indent by 4). */
function servedRoutes(tree: string): Set<string> {
  const out = new Set<string>();
  const stack: string[] = [];
  for (const line of tree.split('\n')) {
    const m = /^(.*?)([─└├]── )(\S+) \(([A-Z, ]+)\)/.exec(line);
    if (!m) continue;
    const depth = (m[1]!.length + m[2]!.length) / 4 - 1;
    stack.length = depth;
    stack.push(m[3]!);
    const path = stack.join('');
    for (const method of m[4]!.split(',').map((s) => s.trim())) {
      if (method !== 'HEAD' && method !== 'OPTIONS') out.add(`${method} ${path}`);
    }
  }
  return out;
}

describe('ops', () => {
  it('B44 /health answers without a database round trip', async () => {
    const r = await b.http('GET', '/health');
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ status: 'healthy', database: 'connected', version: expect.any(String) });
    expect(typeof r.body.uptimeSeconds).toBe('number');
    expect(r.headers.get('content-type')).toMatch(/^application\/json/);
    expect(r.headers.get('access-control-allow-origin')).toBeNull(); // no CORS unless QUEEN_CORS_ORIGINS lists origins
  });

  it('B44 /ready reports the schema version it expects', async () => {
    const r = await b.http('GET', '/ready');
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ ready: true, database: 'connected' });
    expect(r.body.schemaVersion).toBe(r.body.expectedSchemaVersion);
    const { rows } = await b.sql.query(`select version from queen.schema_version where owner = 'broker'`);
    expect(r.body.schemaVersion).toBe(rows[0].version);
  });

  it('B44 /metrics counts pushes per queue', async () => {
    const q = uniqueName('b44');
    for (let i = 0; i < 3; i++) expect((await b.http('POST', '/api/v1/push', { items: [{ queue: q, payload: { i } }] })).status).toBe(201);
    const r = await b.http('GET', '/metrics');
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(r.body).toContain(`queen_messages_pushed_total{queue="${q}"} 3`);
    const alias = await b.http('GET', '/metrics/prometheus');
    expect(alias.status).toBe(200);
    expect(alias.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(alias.body).toContain(`queen_messages_pushed_total{queue="${q}"} 3`);
  });

  it('/metrics carries the request, delivery, ack, long-poll and pool series', async () => {
    const q = uniqueName('series');
    await b.http('POST', '/api/v1/push', { items: [{ queue: q, transactionId: 't1' }, { queue: q, transactionId: 't1' }, { queue: q }] });
    const pop = await b.http('GET', `/api/v1/pop/queue/${q}?batch=10`);
    expect(pop.body.messages).toHaveLength(2);
    const [m1, m2] = pop.body.messages;
    await b.http('POST', '/api/v1/ack/batch', {
      acknowledgments: [
        { transactionId: m1.transactionId, partitionId: m1.partitionId, leaseId: m1.leaseId },
        { transactionId: m2.transactionId, partitionId: m2.partitionId, leaseId: m2.leaseId, status: 'dlq' },
      ],
    });
    // A replayed ack is not counted twice.
    await b.http('POST', '/api/v1/ack', { transactionId: m1.transactionId, partitionId: m1.partitionId });

    const parkedQueue = uniqueName('parked');
    const parked = b.http('GET', `/api/v1/pop/queue/${parkedQueue}?wait=true&timeout=3000`);
    const waiting = await eventually(async () => {
      const text = (await b.http('GET', '/metrics')).body as string;
      return (sample(text, 'queen_long_poll_waiting') ?? 0) >= 1 ? text : undefined;
    }, 2500);
    await b.http('POST', '/api/v1/push', { items: [{ queue: parkedQueue }] });
    expect((await parked).status).toBe(200);

    const text = (await b.http('GET', '/metrics')).body as string;
    expect(sample(text, `queen_messages_pushed_total{queue="${q}"}`)).toBe(2);
    expect(sample(text, `queen_messages_duplicate_total{queue="${q}"}`)).toBe(1);
    expect(sample(text, `queen_messages_delivered_total{queue="${q}"}`)).toBe(2);
    expect(sample(text, `queen_messages_acked_total{queue="${q}",status="completed"}`)).toBe(1);
    expect(sample(text, `queen_messages_acked_total{queue="${q}",status="dlq"}`)).toBe(1);
    expect(sample(text, `queen_dlq_messages_total{queue="${q}"}`)).toBe(1);
    expect(sample(text, 'queen_long_poll_waiting')).toBe(0);
    expect(sample(waiting, 'queen_long_poll_waiting')).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'queen_http_requests_total{route="/api/v1/push",method="POST",status="201"}')).toBeGreaterThanOrEqual(2);
    expect(sample(text, 'queen_http_requests_total{route="/api/v1/pop/queue/:queue",method="GET",status="200"}')).toBeGreaterThanOrEqual(2);
    expect(sample(text, 'queen_http_request_duration_seconds_count{route="/api/v1/push"}')).toBeGreaterThanOrEqual(2);
    expect(text).toMatch(/queen_http_request_duration_seconds_bucket\{le="0\.1",route="\/api\/v1\/push"\} \d+/);
    expect(sample(text, 'queen_db_pool_connections{state="total"}')).toBeGreaterThanOrEqual(1);
    expect(text).toContain('queen_db_pool_connections{state="idle"}');
    expect(text).toContain('queen_db_pool_connections{state="waiting"}');
    // Unknown URLs are labelled by no pattern at all (bounded cardinality).
    await b.http('GET', `/api/v1/nope-${uniqueName()}`);
    const after = (await b.http('GET', '/metrics')).body as string;
    expect(sample(after, 'queen_http_requests_total{route="unmatched",method="GET",status="404"}')).toBeGreaterThanOrEqual(1);
    expect(after).not.toMatch(/route="\/api\/v1\/nope-/);
  });

  it('each broker keeps its own metrics', async () => {
    const other = await startTestBroker({ databaseUrl: b.databaseUrl });
    try {
      const q = uniqueName('own');
      await other.http('POST', '/api/v1/push', { items: [{ queue: q }] });
      expect((await other.http('GET', '/metrics')).body).toContain(`queen_messages_pushed_total{queue="${q}"} 1`);
      // Counters are this process's; the scrape-time gauges read the shared database.
      const mine = (await b.http('GET', '/metrics')).body as string;
      expect(mine).not.toContain(`queen_messages_pushed_total{queue="${q}"}`);
      expect(mine).toContain(`queen_queue_depth{queue="${q}"} 1`);
    } finally {
      await other.stop();
    }
  });

  it('B44 /openapi.json (3.1) lists every route the broker serves', async () => {
    const r = await b.http('GET', '/openapi.json');
    expect(r.status).toBe(200);
    expect(r.body.openapi).toMatch(/^3\.1/);
    const documented = new Set<string>();
    for (const [path, ops] of Object.entries(r.body.paths as Record<string, Record<string, unknown>>)) {
      for (const method of Object.keys(ops)) documented.add(`${method.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ':$1')}`);
    }
    const served = servedRoutes(b.app.printRoutes({ commonPrefix: false }));
    expect(served).toContain('GET /metrics/prometheus');
    expect(served).toContain('GET /api/v1/pop/queue/:queue/partition/:partition');
    for (const route of served) expect(documented, `${route} is served but not in /openapi.json`).toContain(route);
    // The catalogue may hold routes of features this broker did not compose
    // (the deployable adds the KV): documented exactly when served.
    for (const spec of Object.values(allRoutes)) {
      const key = `${spec.method} ${spec.url}`;
      expect(documented.has(key), key).toBe(b.app.hasRoute({ method: spec.method, url: spec.url }));
    }
    for (const route of documented) expect(served, `${route} is documented but not served`).toContain(route);
    for (const route of [
      'GET /health',
      'GET /ready',
      'GET /metrics',
      'GET /metrics/prometheus',
      'GET /openapi.json',
      'POST /api/v1/push',
      'GET /api/v1/pop/queue/:queue',
      'GET /api/v1/pop/queue/:queue/partition/:partition',
      'POST /api/v1/ack',
      'POST /api/v1/ack/batch',
      'POST /api/v1/lease/:leaseId/extend',
      'GET /api/v1/resources/queues',
      'GET /api/v1/resources/queues/:queue',
      'GET /api/v1/consumer-groups/:group',
    ]) {
      expect(documented).toContain(route);
    }
    const push = r.body.paths['/api/v1/push'].post;
    expect(push.requestBody.content['application/json'].schema.properties.items).toBeDefined();
    expect(push.responses['201']).toBeDefined();
    expect(r.body.components.schemas.Error.required).toEqual(['error', 'code']);
  });

  it('request logging is off without the deprecated fastify option', async () => {
    expect(warnings.filter((w) => w.code === 'FSTDEP023' || /disableRequestLogging/.test(w.message))).toEqual([]);
  });
});

describe('PostgreSQL stopped', () => {
  it('B44 /ready answers 503 NOT_READY within 5 s, /health stays 200, push answers 503 DB_UNAVAILABLE', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'queen-pgstop-'));
    await chmod(dir, 0o755);
    const pg = await startEmbeddedPostgres({ dataDir: join(dir, 'pg'), persistent: false, unsafeFast: true });
    let broker: TestBroker | undefined;
    try {
      broker = await startTestBroker({ databaseUrl: pg.url });
      const q = uniqueName('down');
      expect((await broker.http('POST', '/api/v1/push', { items: [{ queue: q }] })).status).toBe(201);
      expect((await broker.http('GET', '/ready')).status).toBe(200);
      await broker.sql.end().catch(() => undefined);
      await pg.stop();
      // One database probe answers /ready for a second: let the last one age out.
      await sleep(1100);

      const t0 = Date.now();
      const ready = await broker.http('GET', '/ready');
      const readyMs = Date.now() - t0;
      expect(ready.status).toBe(503);
      expect(ready.body).toMatchObject({ ready: false, code: 'NOT_READY', database: 'disconnected', expectedSchemaVersion: expect.any(Number) });
      expect(readyMs).toBeLessThan(5000);
      console.log(`/ready with PostgreSQL stopped answered 503 in ${readyMs} ms`);

      const health = await broker.http('GET', '/health');
      expect(health.status).toBe(200);
      expect(health.body).toMatchObject({ status: 'healthy', database: 'disconnected' });

      for (const items of [[{ queue: q }], [{ queue: uniqueName('never') }]]) {
        const t1 = Date.now();
        const push = await broker.http('POST', '/api/v1/push', { items });
        expect(push.status).toBe(503);
        expect(push.body).toMatchObject({ code: 'DB_UNAVAILABLE' });
        expect(JSON.stringify(push.body)).not.toMatch(/ECONNREFUSED|select|queen\./);
        expect(Date.now() - t1).toBeLessThan(6000);
      }
      const pop = await broker.http('GET', `/api/v1/pop/queue/${q}`);
      expect(pop.status).toBe(503);
      expect(pop.body.code).toBe('DB_UNAVAILABLE');
      await sleep(100);
      expect((await broker.http('GET', '/health')).status).toBe(200);
    } finally {
      // The pool and LISTEN connection are already dead: closing must not hang.
      await broker?.close();
      await pg.stop().catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
    }
  }, 60000);

  it('B44 /ready still answers 503 NOT_READY within 5 s when PostgreSQL hangs instead of refusing', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'queen-pghang-'));
    await chmod(dir, 0o755);
    const dataDir = join(dir, 'pg');
    const pg = await startEmbeddedPostgres({ dataDir, persistent: false, unsafeFast: true });
    let broker: TestBroker | undefined;
    let frozen: number[] = [];
    const signal = (sig: string) => {
      for (const pid of frozen) {
        try {
          process.kill(pid, sig);
        } catch {
          /* already gone */
        }
      }
    };
    try {
      broker = await startTestBroker({ databaseUrl: pg.url });
      expect((await broker.http('GET', '/ready')).status).toBe(200);
      // Freeze the postmaster and every backend: connections are accepted by
      // the kernel but nothing ever answers (a hung host, not a refused port).
      const postmaster = Number((await readFile(join(dataDir, 'postmaster.pid'), 'utf8')).split('\n')[0]);
      const children = execFileSync('pgrep', ['-P', String(postmaster)], { encoding: 'utf8' }).split('\n').filter(Boolean).map(Number);
      frozen = [postmaster, ...children];
      signal('SIGSTOP');
      await sleep(1100); // the last probe's answer ages out (1 s cache)

      const t0 = Date.now();
      const ready = await broker.http('GET', '/ready');
      const readyMs = Date.now() - t0;
      expect(ready.status).toBe(503);
      expect(ready.body).toMatchObject({ ready: false, code: 'NOT_READY' });
      expect(readyMs).toBeLessThan(5000);
      console.log(`/ready with PostgreSQL frozen answered 503 in ${readyMs} ms`);
      expect((await broker.http('GET', '/health')).status).toBe(200);
    } finally {
      signal('SIGCONT');
      await broker?.stop();
      await pg.stop().catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
    }
  }, 60000);
});
