import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBroker, uniqueName, type TestBroker } from './harness.js';

// The broker's one clock (PostgreSQL's) made virtual in a test database.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker({ virtualClock: '2026-01-05T10:00:00.000Z' });
});
afterAll(async () => b?.stop());

const pop = (queue: string, group: string) => b.http('GET', `/api/v1/pop/queue/${queue}?batch=10&consumerGroup=${group}`);

describe('virtual clock', () => {
  it('stamps createdAt with the virtual time, which moves only when told to', async () => {
    const q = uniqueName('vc');
    expect((await b.http('POST', '/api/v1/push', { items: [{ queue: q, payload: 1 }] })).status).toBe(201);
    await b.clock!.advance(61_500);
    expect((await b.http('POST', '/api/v1/push', { items: [{ queue: q, payload: 2 }] })).status).toBe(201);
    const res = await b.http('GET', `/api/v1/pop/queue/${q}?batch=10&autoAck=true&consumerGroup=read`);
    expect(res.body.messages.map((m: any) => [m.data, new Date(m.createdAt).toISOString()])).toEqual([
      [1, '2026-01-05T10:00:00.000Z'],
      [2, '2026-01-05T10:01:01.500Z'],
    ]);
    expect(b.clock!.now()).toBe(Date.parse('2026-01-05T10:01:01.500Z'));
    const { rows } = await b.sql.query('select now() as now, clock_timestamp() as clock');
    expect(rows[0]).toEqual({ now: new Date('2026-01-05T10:01:01.500Z'), clock: new Date('2026-01-05T10:01:01.500Z') });
  });

  it('leases expire on the virtual clock: a popped, unacked message comes back only after the clock passes its lease', async () => {
    const q = uniqueName('vc-lease');
    expect((await b.http('POST', '/api/v1/configure', { queue: q, options: { leaseTime: 30 } })).status).toBe(200);
    await b.http('POST', '/api/v1/push', { items: [{ queue: q, payload: 'x' }] });
    expect((await pop(q, 'g')).status).toBe(200);
    expect((await pop(q, 'g')).status).toBe(204);
    await b.clock!.advance(29_000);
    expect((await pop(q, 'g')).status).toBe(204);
    await b.clock!.advance(1_000);
    const again = await pop(q, 'g');
    expect(again.status).toBe(200);
    expect(again.body.messages.map((m: any) => m.data)).toEqual(['x']);
  });

  it('never goes back, and a database without it runs on the real clock', async () => {
    await expect(b.clock!.set('2026-01-05T09:00:00.000Z')).rejects.toThrow(/cannot go back/);
    const real = await startTestBroker();
    try {
      expect(real.clock).toBeUndefined();
      const before = Date.now();
      await real.http('POST', '/api/v1/push', { items: [{ queue: 'r', payload: 1 }] });
      const res = await real.http('GET', '/api/v1/pop/queue/r?batch=1&autoAck=true');
      expect(Math.abs(Date.parse(res.body.messages[0].createdAt) - before)).toBeLessThan(60_000);
    } finally {
      await real.stop();
    }
  });
});
