import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { eventually, freshDatabase, requestJson, sleep, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { freePort } from '../db/embedded-postgres.js';
import { fireDueTimers } from './timers.js';

// Timers (PROTOCOL §6, scheduled through POST /api/v1/transaction, fired by
// the timer service every broker runs), over real HTTP on a real PostgreSQL.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

const txn = (body: unknown, broker = b) => broker.http('POST', '/api/v1/transaction', body);
const pop = (queue: string, params = '', broker = b) => broker.http('GET', `/api/v1/pop/queue/${encodeURIComponent(queue)}?${params}`);
const pending = async (queue: string) => Number((await b.sql.query('select count(*) from queen.log_timers where queue_name = $1', [queue])).rows[0].count);
const messages = async (queue: string) =>
  (
    await b.sql.query(
      `select m.transaction_id, m.payload, m.producer_sub, m.created_at, p.name as partition
         from queen.messages m join queen.partitions p on p.id = m.partition_id
        where p.queue_name = $1 order by m.msg_offset`,
      [queue],
    )
  ).rows;

describe('timers', () => {
  it('K9 a timer fires once, never early, with transactionId timer:<timerId>', async () => {
    const q = uniqueName('k9');
    const t0 = Date.now();
    const r = await txn({ timers: [{ queue: q, delayMs: 1000, payload: { x: 1 } }] });
    expect(r.status).toBe(200);
    expect(r.body.success).toBe(true);
    expect(r.body.results).toEqual([]);
    expect(r.body.kvResults).toEqual([]);
    const [t] = r.body.timerResults;
    expect(t.status).toBe('scheduled');
    expect(t.timerId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const fireAt = Date.parse(t.fireAt);
    expect(fireAt).toBeGreaterThanOrEqual(t0 + 1000);
    expect(t.fireAt).toMatch(/Z$/);

    await sleep(Math.max(0, t0 + 500 - Date.now()));
    expect((await pop(q)).status).toBe(204);
    // Delivered by 2 s (a long-poll parked before the fire is woken by it).
    const got = await pop(q, `wait=true&timeout=${Math.max(100, t0 + 2000 - Date.now())}`);
    expect(got.status).toBe(200);
    expect(Date.now() - t0).toBeLessThan(2100);
    const [m] = got.body.messages;
    expect(m.data).toEqual({ x: 1 });
    expect(m.transactionId).toBe(`timer:${t.timerId}`);
    expect(Date.parse(m.createdAt)).toBeGreaterThanOrEqual(fireAt);
    // Normally within one poll (200 ms) + 100 ms; the bound here leaves room for a loaded machine.
    const lateness = Date.parse(m.createdAt) - fireAt;
    if (process.env.QUEEN_TEST_VERBOSE) console.log(`timer fired ${lateness} ms after fireAt`);
    expect(lateness).toBeLessThan(1000);
    await b.http('POST', '/api/v1/ack', { transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId });
    expect(await pending(q)).toBe(0);
    await sleep(Math.max(0, t0 + 5000 - Date.now()));
    expect((await pop(q)).status).toBe(204);
    expect((await messages(q)).length).toBe(1);
  });

  it('K9 a timer with transactionId R carries R; scheduling R again while pending answers duplicate with the same timerId', async () => {
    const q = uniqueName('k9r');
    const first = await txn({ timers: [{ queue: q, partition: 'p1', delayMs: 1500, payload: 1, transactionId: 'R' }] });
    const again = await txn({ timers: [{ queue: q, partition: 'p1', delayMs: 50, payload: 2, transactionId: 'R' }] });
    expect(again.body.timerResults[0]).toEqual({ ...first.body.timerResults[0], status: 'duplicate' });
    // Same transactionId elsewhere (another partition) is a different timer; within one request the first wins.
    const other = await txn({
      timers: [
        { queue: q, partition: 'p2', delayMs: 0, payload: 3, transactionId: 'R' },
        { queue: q, partition: 'p2', delayMs: 0, payload: 4, transactionId: 'R' },
      ],
    });
    expect(other.body.timerResults[0].status).toBe('scheduled');
    expect(other.body.timerResults[1]).toEqual({ ...other.body.timerResults[0], status: 'duplicate' });
    expect(other.body.timerResults[0].timerId).not.toBe(first.body.timerResults[0].timerId);
    await eventually(async () => (await messages(q)).length === 2, 5000);
    const rows = await messages(q);
    expect(rows.map((r) => [r.partition, r.transaction_id, r.payload])).toEqual([
      ['p2', 'R', 3],
      ['p1', 'R', 1],
    ]);
    expect(await pending(q)).toBe(0);
  });

  it('K10 a fireAt in the past is delivered within 1 s; a rolled-back transaction leaves no timer', async () => {
    const q = uniqueName('k10');
    const t0 = Date.now();
    const past = await txn({ timers: [{ queue: q, fireAt: new Date(Date.now() - 3600_000).toISOString(), payload: 'late' }] });
    expect(past.body.timerResults[0].status).toBe('scheduled');
    const got = await pop(q, 'wait=true&timeout=1000');
    expect(got.status).toBe(200);
    expect(got.body.messages[0].data).toBe('late');
    expect(Date.now() - t0).toBeLessThan(1000);

    const rolled = uniqueName('k10rb');
    const r = await txn({
      timers: [{ queue: rolled, delayMs: 0, payload: 'never' }],
      operations: [{ type: 'ack', transactionId: 'nope', partitionId: '00000000-0000-4000-8000-000000000000' }],
    });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ success: false, code: 'MESSAGE_NOT_FOUND', results: [] });
    expect(await pending(rolled)).toBe(0);
    await sleep(800);
    expect((await pop(rolled)).status).toBe(204);
    expect((await b.http('GET', `/api/v1/resources/queues/${rolled}`)).status).toBe(404);
  });

  it('K10 two broker processes on one database, 100 timers due at the same instant → exactly 100 messages, no duplicates', async () => {
    const second = await startTestBroker({ databaseUrl: b.databaseUrl });
    const firedTotal = async (broker: TestBroker) => {
      const text = (await broker.http('GET', '/metrics')).body as string;
      return Number(/^queen_timers_fired_total (\d+)/m.exec(text)?.[1] ?? 0);
    };
    try {
      const before = (await firedTotal(b)) + (await firedTotal(second));
      const q = uniqueName('k10x2');
      const fireAt = new Date(Date.now() + 1500).toISOString();
      const timers = Array.from({ length: 100 }, (_, i) => ({ queue: q, partition: `p${i % 7}`, fireAt, payload: { i } }));
      const r = await txn({ timers });
      expect(r.body.timerResults.filter((t: any) => t.status === 'scheduled').length).toBe(100);
      // Besides both brokers' firer services, ten extra firers per broker race for the same due set.
      await sleep(Math.max(0, Date.parse(fireAt) - Date.now()));
      const extra = await Promise.all([...Array(10).fill(b), ...Array(10).fill(second)].map((x: TestBroker) => fireDueTimers(x.ctx)));
      await eventually(async () => (await pending(q)) === 0, 10000);
      await sleep(600);
      const rows = await messages(q);
      expect(rows.length).toBe(100);
      expect(new Set(rows.map((m) => m.transaction_id)).size).toBe(100);
      expect(rows.map((m) => m.payload.i).sort((x: number, y: number) => x - y)).toEqual(Array.from({ length: 100 }, (_, i) => i));
      for (const m of rows) expect(m.created_at.getTime()).toBeGreaterThanOrEqual(Date.parse(fireAt));
      const late = rows.map((m) => m.created_at.getTime() - Date.parse(fireAt));
      if (process.env.QUEEN_TEST_VERBOSE) console.log(`100 timers: fired ${Math.min(...late)}..${Math.max(...late)} ms after fireAt`);
      // Every fire was counted once, by whichever broker made it.
      expect((await firedTotal(b)) + (await firedTotal(second)) - before).toBe(100);
      expect(extra.reduce((x, y) => x + y, 0)).toBeLessThanOrEqual(100);
    } finally {
      await second.stop();
    }
  });

  it('timer fires stamp producerSub, auto-create the target, dedup against retained messages, and queue delete drops pending timers', async () => {
    const q = uniqueName('tmisc');
    // Dedup: a message with transactionId D already retained → the fire is a duplicate, nothing new written.
    await b.http('POST', '/api/v1/push', { items: [{ queue: q, payload: 'original', transactionId: 'D' }] });
    await txn({ timers: [{ queue: q, delayMs: 0, payload: 'twin', transactionId: 'D' }] });
    await eventually(async () => (await pending(q)) === 0, 3000);
    expect((await messages(q)).map((m) => m.payload)).toEqual(['original']);

    // Queue delete removes pending timers targeting it.
    const doomed = uniqueName('tdel');
    await txn({ timers: [{ queue: doomed, delayMs: 60_000, payload: 1 }, { queue: doomed, partition: 'x', delayMs: 60_000, payload: 2 }] });
    expect(await pending(doomed)).toBe(2);
    const del = await b.http('DELETE', `/api/v1/resources/queues/${doomed}`);
    expect(del.status).toBe(200);
    expect(await pending(doomed)).toBe(0);

    // The maintenance `timers` task fires what is due and reports it.
    const mq = uniqueName('tmaint');
    await b.sql.query(
      `insert into queen.log_timers (id, queue_name, partition_name, payload, fire_at, producer_sub)
       values (gen_random_uuid(), $1, 'Default', '"m"', now() - interval '1 second', 'svc-x')`,
      [mq],
    );
    const run = await b.http('POST', '/api/v1/system/maintenance/run', { tasks: ['timers'] });
    expect(run.status).toBe(200);
    // The firer service may have won the race for it: either way it fired exactly once.
    await eventually(async () => (await messages(mq)).length === 1, 3000);
    expect(run.body.timers.fired).toBeLessThanOrEqual(1);
    const [m] = await messages(mq);
    expect(m.payload).toBe('m');
    expect(m.producer_sub).toBe('svc-x');
  });

  it('a fired timer carries the scheduling request\'s subject as producerSub (auth on)', async () => {
    const secured = await startTestBroker({
      databaseUrl: b.databaseUrl,
      config: { authEnabled: true, apiKeys: [{ key: 'key-svc-a', level: 'read-write', subject: 'svc-a' }] },
    });
    try {
      const q = uniqueName('tsub');
      const auth = { authorization: 'Bearer key-svc-a' };
      const r = await secured.http('POST', '/api/v1/transaction', { timers: [{ queue: q, delayMs: 0, payload: 'x', producerSub: 'forged' }] }, auth);
      expect(r.body.success).toBe(true);
      expect((await secured.http('POST', '/api/v1/transaction', { timers: [{ queue: q, delayMs: 0, payload: 'x' }] })).status).toBe(401);
      await eventually(async () => (await messages(q)).length === 1, 3000);
      expect((await messages(q))[0].producer_sub).toBe('svc-a');
      const metrics = (await secured.http('GET', '/metrics', undefined, auth)).body as string;
      expect(metrics).toMatch(/^queen_timers_fired_total \d+/m);
    } finally {
      await secured.stop();
    }
  });

  it('X11 timers with both fireAt and delayMs, or neither, or out of range → 400 and nothing scheduled', async () => {
    const q = uniqueName('x11t');
    const now = new Date().toISOString();
    const cases: [unknown, string][] = [
      [{ queue: q, payload: 1, fireAt: now, delayMs: 10 }, 'body.timers[0]'],
      [{ queue: q, payload: 1 }, 'body.timers[0]'],
      [{ queue: q, payload: 1, delayMs: -1 }, 'body.timers[0].delayMs'],
      [{ queue: q, payload: 1, delayMs: 1.5 }, 'body.timers[0].delayMs'],
      [{ queue: q, payload: 1, delayMs: 31536000001 }, 'body.timers[0].delayMs'],
      [{ queue: q, payload: 1, fireAt: 'tomorrow' }, 'body.timers[0].fireAt'],
      [{ queue: q, payload: 1, fireAt: new Date(Date.now() + 400 * 86400_000).toISOString() }, 'body.timers[0].fireAt'],
      [{ queue: 'a/b', payload: 1, delayMs: 0 }, 'body.timers[0].queue'],
    ];
    for (const [timer, field] of cases) {
      const r = await txn({ timers: [timer] });
      expect(r.status, JSON.stringify(timer)).toBe(400);
      expect(r.body.code).toBe('VALIDATION_FAILED');
      expect(r.body.details.map((d: any) => d.field)).toContain(field);
    }
    expect(await pending(q)).toBe(0);
  });

  it('K10 crash: SIGKILL the broker process while timers are due → a restarted broker fires every timer exactly once', async () => {
    const databaseUrl = await freshDatabase();
    const port = await freePort();
    const root = fileURLToPath(new URL('../../../..', import.meta.url));
    const child = spawn('npx', ['tsx', 'apps/broker/src/main.ts'], {
      cwd: root,
      env: { ...process.env, DATABASE_URL: databaseUrl, QUEEN_PORT: String(port), QUEEN_HOST: '127.0.0.1', QUEEN_LOG_LEVEL: 'warn', QUEEN_TIMER_POLL_MS: '20' },
      stdio: 'ignore',
      detached: true,
    });
    const url = `http://127.0.0.1:${port}`;
    let restarted: TestBroker | undefined;
    try {
      await eventually(async () => (await requestJson(url, 'GET', '/ready')).status === 200, 45000, 200);
      // The deployable composes the KV plugin (apps/broker/src/composition.ts).
      expect((await requestJson(url, 'PUT', '/api/v1/kv/app/composed', { value: true })).status).toBe(200);
      const q = uniqueName('crash');
      const N = 300;
      // Due in waves over the next ~600 ms, so the kill lands while the firer is working through them.
      const t0 = Date.now() + 400;
      const timers = Array.from({ length: N }, (_, i) => ({ queue: q, partition: `p${i % 3}`, fireAt: new Date(t0 + (i % 30) * 20).toISOString(), payload: { i } }));
      const r = await requestJson(url, 'POST', '/api/v1/transaction', { timers });
      expect(r.body.success).toBe(true);
      const sql = (await import('pg')).default;
      const pool = new sql.Pool({ connectionString: databaseUrl, max: 2 });
      const count = async (text: string) => Number((await pool.query(text, [q])).rows[0].n);
      const fired = () => count(`select count(*) as n from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1`);
      try {
        // Kill once the firer has started (some fired) but, as a rule, before it finished.
        await eventually(async () => (await fired()) > 0, 10000, 5);
        process.kill(-child.pid!, 'SIGKILL');
        const atKill = await fired();
        if (process.env.QUEEN_TEST_VERBOSE) console.log(`crash test: ${atKill} of ${N} fired when the broker was killed`);
        restarted = await startTestBroker({ databaseUrl });
        await eventually(async () => (await count('select count(*) as n from queen.log_timers where queue_name = $1')) === 0, 10000);
        await sleep(500);
        const rows = (await pool.query(
          `select m.payload, m.transaction_id from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1`,
          [q],
        )).rows;
        expect(rows.length).toBe(N);
        expect(new Set(rows.map((x) => x.payload.i)).size).toBe(N);
        expect(new Set(rows.map((x) => x.transaction_id)).size).toBe(N);
        expect(atKill).toBeLessThanOrEqual(N);
      } finally {
        await pool.end();
      }
    } finally {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        /* already gone */
      }
      await restarted?.stop();
    }
  });
});
