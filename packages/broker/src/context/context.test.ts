import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { setMaintenanceTask } from './context.js';

// Per-broker state lives on each BrokerContext (never in module globals):
// two brokers in one process, here on one database, keep their own series,
// encryption state and composed-in features.

let a: TestBroker;
let b: TestBroker;
beforeAll(async () => {
  a = await startTestBroker();
  b = await startTestBroker({ databaseUrl: a.databaseUrl });
});
afterAll(async () => {
  await b?.stop();
  await a?.stop();
});

// What each broker's own registry serves for the queue (the top-N counter renders into it at scrape time).
const pushed = async (x: TestBroker, queue: string) => {
  const text = await x.ctx.metrics.registry.metrics();
  const line = text.split('\n').find((l) => l.startsWith(`queen_messages_pushed_total{queue="${queue}"}`));
  return line ? Number(line.split(' ').pop()) : 0;
};

describe('BrokerContext', () => {
  it('each broker counts into its own registry', async () => {
    const q = uniqueName('ctx');
    expect(a.ctx.metrics.registry).not.toBe(b.ctx.metrics.registry);
    await a.http('POST', '/api/v1/push', { items: [{ queue: q, payload: 1 }, { queue: q, payload: 2 }] });
    expect(await pushed(a, q)).toBe(2);
    expect(await pushed(b, q)).toBe(0);
  });

  it('a feature composed into one broker is not seen by another', async () => {
    let runs = 0;
    setMaintenanceTask(a.ctx, 'kv', async () => ({ expiredPurged: ++runs }));
    expect(a.ctx.hooks.maintenance.kv).toBeDefined();
    expect(b.ctx.hooks.maintenance.kv).toBeUndefined();
    const onA = await a.http('POST', '/api/v1/system/maintenance/run', { tasks: ['kv'] });
    expect(onA.body.kv).toEqual({ expiredPurged: 1 });
    const onB = await b.http('POST', '/api/v1/system/maintenance/run', { tasks: ['kv'] });
    expect(onB.body.kv).toEqual({ expiredPurged: 0 });
    expect(runs).toBe(1);
    expect(a.ctx.encryption).not.toBe(b.ctx.encryption);
  });
});
