import { afterEach, describe, expect, it } from 'vitest';
import { testStream, type TestStream } from '@queen-mq/testing';
import { ordersPerMinute } from './orders-per-minute.js';

// The worker's chain, as written, with its real 60-second windows: driven by
// the test kit on a virtual clock, so every emit is exact and no test waits a
// minute (the real-time run is in orders-per-minute.test.ts).

let t: TestStream | undefined;
afterEach(async () => {
  await t?.stop();
  t = undefined;
});

const data = (emits: { data: unknown }[]) => emits.map((e) => e.data);

describe('orders-per-minute on a virtual clock', () => {
  it('one {count, sum} per minute: the idle flush closes a minute when the clock reaches its end, the next order closes it otherwise', async () => {
    t = await testStream(ordersPerMinute({ name: 'orders' }, { name: 'orders.per_minute' }), { startAt: '2026-01-05T10:00:00.000Z' });

    expect(await t.push([{ amount: 10 }, { amount: -5 }, { amount: 20 }, { amount: 0 }])).toEqual([]); // 10:00:00
    expect(await t.advance(45_000)).toEqual([]); // 10:00:45: the flush finds nothing ripe
    expect(await t.push([{ amount: 5 }])).toEqual([]);
    expect((await t.state()).map((r) => r.value)).toEqual([
      { acc: { count: 3, sum: 35 }, windowStart: Date.parse('2026-01-05T10:00:00.000Z'), windowEnd: Date.parse('2026-01-05T10:01:00.000Z') },
    ]);

    // 10:01:00: the minute has ended, the idle flush emits it
    expect(data(await t.advance(15_000))).toEqual([{ count: 3, sum: 35 }]);

    // an order at 10:01:30, then one at 10:02:10 before any flush: the second order's cycle closes 10:01
    await t.advance(30_000);
    expect(await t.push([{ amount: 7 }])).toEqual([]);
    await t.broker.clock!.advance(40_000);
    expect(data(await t.push([{ amount: 1 }]))).toEqual([{ count: 1, sum: 7 }]);

    expect(data(t.emits())).toEqual([{ count: 3, sum: 35 }, { count: 1, sum: 7 }]);
    expect(t.metrics()).toMatchObject({ messagesTotal: 7, flushCyclesTotal: 1 });
    expect(t.errors).toEqual([]);
    expect(await t.deadLetters()).toEqual([]);
  });
});
