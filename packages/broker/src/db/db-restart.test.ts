import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kvBrokerFeature } from '@queen-mq/kv/broker';
import { startBroker, type RunningBroker } from '../broker.js';
import { startEmbeddedPostgres, type EmbeddedPostgresHandle } from './embedded-postgres.js';

// PostgreSQL stopped and started under load: the broker process outlives it,
// answers 503 DB_UNAVAILABLE meanwhile, says so once each way, and serves
// again within 2 s of PostgreSQL accepting connections. This file runs its
// own cluster (the suite's shared one cannot be stopped under other files).

let dir: string;
let pgHandle: EmbeddedPostgresHandle;
let broker: RunningBroker;
const logLines: { level: number; msg: string; time: number }[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'queen-restart-'));
  await chmod(dir, 0o755);
  pgHandle = await startEmbeddedPostgres({ dataDir: join(dir, 'pg'), persistent: true, unsafeFast: true });
  const logger = pino({ level: 'info' }, {
    write(line: string) {
      const entry = JSON.parse(line);
      logLines.push({ level: entry.level, msg: entry.msg, time: entry.time });
    },
  });
  broker = await startBroker({
    logger,
    ...kvBrokerFeature(),
    config: { port: 0, host: '127.0.0.1', databaseUrl: pgHandle.url, timerPollMs: 50, retentionIntervalMs: 1000 },
  });
});

afterAll(async () => {
  await broker?.close();
  await pgHandle?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

interface Answer {
  status: number;
  code?: string;
}

async function call(method: string, path: string, body?: unknown): Promise<Answer & { body: any }> {
  const res = await fetch(broker.url + path, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(10000),
  });
  const text = await res.text();
  const parsed = text ? JSON.parse(text) : undefined;
  return { status: res.status, code: parsed?.code, body: parsed };
}

const QUEUE = 'restart-q';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('PostgreSQL restart under load', () => {
  it('the broker survives a stop/start of PostgreSQL: 503 DB_UNAVAILABLE while down (DB_OUTCOME_UNKNOWN for what was in flight), one log line each way, service back within 2 s, every 201 push stored exactly once', async () => {
    const acknowledged = new Set<string>(); // transactionIds of pushes answered 201 (or committed by a 200 transaction)
    const unexpected: string[] = [];
    const seen = new Map<string, number>(); // "<kind> <status> <code>" → count
    const note = (kind: string, a: Answer) => {
      const key = `${kind} ${a.status}${a.code ? ` ${a.code}` : ''}`;
      seen.set(key, (seen.get(key) ?? 0) + 1);
      // A request in flight when PostgreSQL shut down answers DB_OUTCOME_UNKNOWN (its statement may have committed).
      const ok = a.status === 503 ? a.code === 'DB_UNAVAILABLE' || a.code === 'DB_OUTCOME_UNKNOWN' : kind === 'pop' ? a.status === 200 || a.status === 204 : a.status === 200 || a.status === 201;
      if (!ok) unexpected.push(key);
    };
    let seq = 0;
    let running = true;

    const loops = [
      // pushes, each with its own transactionId (what lets a client retry after a 503)
      ...[0, 1].map((w) => async () => {
        while (running) {
          const id = `push-${w}-${seq++}`;
          const a = await call('POST', '/api/v1/push', { items: [{ queue: QUEUE, partition: `p${seq % 4}`, transactionId: id, payload: { id } }] });
          note('push', a);
          if (a.status === 201) acknowledged.add(id);
          if (a.status === 503) await sleep(20);
        }
      }),
      async () => {
        while (running) {
          const a = await call('GET', `/api/v1/pop/queue/${QUEUE}?wait=true&timeout=300&batch=5&autoAck=true`);
          note('pop', a);
          if (a.status === 503) await sleep(20);
        }
      },
      async () => {
        while (running) {
          const id = `txn-${seq++}`;
          const a = await call('POST', '/api/v1/transaction', {
            operations: [{ type: 'push', items: [{ queue: QUEUE, partition: 'txn', transactionId: id, payload: { id } }] }],
            kv: [{ op: 'incr', namespace: 'restart', key: 'txns' }],
          });
          note('transaction', a);
          if (a.status === 200 && a.body.success) acknowledged.add(id);
          if (a.status === 503) await sleep(20);
        }
      },
      async () => {
        while (running) {
          const a = await call('PUT', `/api/v1/kv/restart/k${seq++ % 10}`, { value: { at: Date.now() } });
          note('kv', a);
          if (a.status === 503) await sleep(20);
        }
      },
    ].map((loop) => loop());

    // A pool of the test's own for the SQL checks; its idle client dies with the server too.
    const sql = new pg.Pool({ connectionString: pgHandle.url, max: 1 });
    sql.on('error', () => undefined);
    try {
      await sleep(1500);
      expect(acknowledged.size).toBeGreaterThan(10); // the load really runs

      // Down.
      const linesBefore = logLines.length;
      await pgHandle.stop();
      await sleep(1500); // load keeps hitting the broker; every timer poll (50 ms) would have failed ~30 times
      const downAnswers = await Promise.all([
        call('POST', '/api/v1/push', { items: [{ queue: QUEUE, partition: 'probe', transactionId: 'probe-down', payload: {} }] }),
        call('GET', `/api/v1/pop/queue/${QUEUE}?wait=false`),
        call('POST', '/api/v1/transaction', { operations: [{ type: 'push', items: [{ queue: QUEUE, payload: {} }] }] }),
        call('PUT', '/api/v1/kv/restart/down', { value: 1 }),
      ]);
      for (const a of downAnswers) expect({ status: a.status, code: a.code }).toEqual({ status: 503, code: 'DB_UNAVAILABLE' });
      expect((await call('GET', '/health')).body.database).toBe('disconnected');

      // Up again: every kind of call is served within 2 s of PostgreSQL accepting connections.
      await pgHandle.start();
      const upAt = Date.now();
      const served = async (fn: () => Promise<Answer>, good: number[]) => {
        for (;;) {
          const a = await fn();
          if (good.includes(a.status)) return Date.now() - upAt;
          if (Date.now() - upAt > 5000) throw new Error(`still ${a.status} ${a.code} 5 s after PostgreSQL came back`);
          await sleep(25);
        }
      };
      const resumeMs = await Promise.all([
        served(() => call('POST', '/api/v1/push', { items: [{ queue: QUEUE, partition: 'probe', transactionId: 'probe-up', payload: {} }] }), [201]),
        served(() => call('GET', `/api/v1/pop/queue/${QUEUE}?wait=false&consumerGroup=probe`), [200, 204]),
        served(() => call('POST', '/api/v1/transaction', { kv: [{ op: 'set', namespace: 'restart', key: 'up', value: 1 }] }), [200]),
        served(() => call('PUT', '/api/v1/kv/restart/up2', { value: 1 }), [200, 201]),
      ]);
      expect(Math.max(...resumeMs)).toBeLessThan(2000);
      acknowledged.add('probe-up');

      // The LISTEN connection (cross-broker wake-ups) is back too.
      const listening = async () => (await sql.query(`select count(*)::int as n from pg_stat_activity where application_name = 'queen-listen'`)).rows[0].n;
      const deadline = Date.now() + 2000;
      while ((await listening()) < 1 && Date.now() < deadline) await sleep(50);
      expect(await listening()).toBe(1);

      await sleep(800); // load on the restarted database
      running = false;
      await Promise.all(loops);

      expect(unexpected).toEqual([]);
      expect(seen.get('push 503 DB_UNAVAILABLE')).toBeGreaterThan(0);
      expect(seen.get('push 201')).toBeGreaterThan(0);

      // One line when the database went, one when it came back; nothing else at warn or above.
      const outage = logLines.slice(linesBefore);
      const transitions = outage.filter((l) => l.level >= 40 || /^database /.test(l.msg)).map((l) => `${l.level >= 40 ? 'warn+' : 'info'} ${l.msg}`);
      expect(transitions).toEqual(['warn+ database unavailable; answering 503 DB_UNAVAILABLE until it is back', 'info database available again']);

      // Every push answered 201 is stored, once.
      const { rows } = await sql.query<{ transaction_id: string; n: number }>(
        `select m.transaction_id, count(*)::int as n from queen.messages m
           join queen.partitions p on p.id = m.partition_id join queen.queues q on q.id = p.queue_id
          where q.name = $1 group by m.transaction_id`,
        [QUEUE],
      );
      const stored = new Map(rows.map((r) => [r.transaction_id, r.n]));
      const missing = [...acknowledged].filter((id) => !stored.has(id));
      const doubled = rows.filter((r) => r.n !== 1);
      expect({ acknowledged: acknowledged.size, missing, doubled }).toEqual({ acknowledged: acknowledged.size, missing: [], doubled: [] });
    } finally {
      running = false;
      await Promise.allSettled(loops);
      await sql.end();
    }
  });
});
