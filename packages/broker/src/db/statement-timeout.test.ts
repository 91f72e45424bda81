import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QueenError } from '@queen-mq/protocol';
import { Database } from './database.js';
import { setMaintenanceTask } from '../context/context.js';
import { startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// QUEEN_STATEMENT_TIMEOUT_MS bounds ordinary statements on the server; a
// long-poll pop waits in JS between short claims, so it is never cut.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker({ config: { statementTimeoutMs: 300 } });
});
afterAll(async () => b?.stop());

describe('statement timeout', () => {
  it('every pool connection carries it; a statement past it answers DB_UNAVAILABLE without marking the database down', async () => {
    expect((await b.ctx.db.query<{ statement_timeout: string }>('show statement_timeout')).rows[0]!.statement_timeout).toBe('300ms');
    const err = await b.ctx.db.query('select pg_sleep(1)').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(QueenError);
    expect((err as QueenError).code).toBe('DB_UNAVAILABLE');
    expect(b.ctx.db.available).toBe(true);
    expect((await b.http('GET', '/health')).body.database).toBe('connected');
  });

  it('a long-poll pop parked 1.5 s (five times the bound) answers 204, not 503', async () => {
    const t0 = Date.now();
    const r = await b.http('GET', `/api/v1/pop/queue/${uniqueName('st')}?wait=true&timeout=1500`);
    expect(r.status).toBe(204);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1500);
  });

  it('a maintenance pass runs without the bound (a task slower than it still completes)', async () => {
    setMaintenanceTask(b.ctx, 'kv', async (client) => {
      await client.query('select pg_sleep(0.6)');
      return { expiredPurged: 7 };
    });
    const r = await b.http('POST', '/api/v1/system/maintenance/run', { tasks: ['kv'] });
    expect(r.status).toBe(200);
    expect(r.body.kv).toEqual({ expiredPurged: 7 });
  });
});

describe('a busy pool', () => {
  it('a request that waits out the pool answers DB_UNAVAILABLE without marking the database down (back-pressure, not an outage)', async () => {
    const db = new Database(b.ctx.db.url, { ...b.ctx.config, statementTimeoutMs: 5000, poolSize: 1, poolWaitMs: 200 });
    const downs: unknown[] = [];
    db.on('down', (err) => downs.push(err));
    try {
      await db.query('select 1');
      const held = db.transaction((c) => c.query('select pg_sleep(0.8)'));
      const err = await db.query('select 1').catch((e: unknown) => e);
      await held;
      expect(err).toBeInstanceOf(QueenError);
      expect((err as QueenError).code).toBe('DB_UNAVAILABLE');
      expect((err as QueenError).message).toMatch(/pool is busy/);
      expect(db.available).toBe(true);
      expect(downs).toEqual([]);
    } finally {
      await db.close();
    }
  });
});

describe('outage bookkeeping', () => {
  it('a statement that began while PostgreSQL was down and fails after the recovery does not open a second outage', async () => {
    const db = new Database('postgres://queen@127.0.0.1:1/none', { ...b.ctx.config, poolSize: 2 });
    const downs: unknown[] = [];
    db.on('down', (err) => downs.push(err));
    try {
      db.markUp(); // as if it had been serving
      db.markDown(new Error('lost'));
      const late = db.query('select 1').catch((e: unknown) => e); // refused, answered after the line below
      db.markUp();
      const err = await late;
      expect((err as QueenError).code).toBe('DB_UNAVAILABLE');
      expect(db.available).toBe(true);
      expect(downs).toHaveLength(1);
      const failed = await db.query('select 1').catch((e: unknown) => e); // begun after the recovery: a new outage
      expect((failed as QueenError).code).toBe('DB_UNAVAILABLE');
      expect(db.available).toBe(false);
      expect(downs).toHaveLength(2);
    } finally {
      await db.close();
    }
  });
});
