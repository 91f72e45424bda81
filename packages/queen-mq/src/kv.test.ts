import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kvBrokerFeature } from '@queen-mq/kv/broker';
import { eventually, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { KvClient, Queen } from './index.js';

// The umbrella's Queen carries the KV: `queen.kv` and `tx.kv` with no other
// import, against a broker that composes the KV's broker half.

let b: TestBroker;
let queen: Queen;
beforeAll(async () => {
  b = await startTestBroker({ ...kvBrokerFeature() });
  queen = new Queen({ url: b.url, retries: 0 });
});
afterAll(async () => {
  await queen?.close();
  await b?.stop();
});

describe('queen-mq KV', () => {
  it('queen.kv is the KV client: set then get round-trips the value', async () => {
    const ns = uniqueName('umbrella-kv');
    expect(queen.kv).toBeInstanceOf(KvClient);
    const put = await queen.kv.set(ns, 'greeting', { text: 'hello' });
    expect(await queen.kv.get(ns, 'greeting')).toMatchObject({ value: { text: 'hello' }, version: put.version });
  });

  it('tx.kv commits with a timer in one transaction; the timer pushes its message when due', async () => {
    const ns = uniqueName('umbrella-tx');
    const later = uniqueName('umbrella-later');
    const result = await queen.transaction().kv.incr(ns, 'count', { by: 3 }).timer({ queue: later, payload: { due: true }, delayMs: 300 }).commit();
    expect(result.kvResults).toMatchObject([{ op: 'incr', value: 3, applied: true }]);
    expect(result.timerResults).toHaveLength(1);
    expect(await queen.queue(later).pop({ batch: 1 })).toBeNull(); // not due yet
    const fired = await eventually(() => queen.queue(later).pop({ batch: 1 }), 10000);
    expect(fired.messages.map((m) => m.data)).toEqual([{ due: true }]);
  });
});
