import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleep, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { runOrdersPerMinute } from './orders-per-minute.js';

// The seed example end to end: a real broker, the worker in this process with
// 1-second windows, orders pushed in bursts, exact totals per window on the sink.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

async function readAll(queue: string, group: string) {
  const out: any[] = [];
  let empty = 0;
  while (empty < 2) {
    const res = await b.http('GET', `/api/v1/pop/queue/${queue}?batch=500&wait=true&timeout=300&autoAck=true&consumerGroup=${group}`);
    if (res.status === 204) empty += 1;
    else {
      empty = 0;
      out.push(...res.body.messages);
    }
  }
  return out;
}

describe('orders-per-minute worker', () => {
  it('emits exactly one {count, sum} per closed window, positive amounts only', async () => {
    const source = uniqueName('orders');
    const sink = `${source}.per_minute`;
    await b.http('POST', '/api/v1/configure', { queue: source, options: { leaseTime: 5 } });
    const errors: Error[] = [];
    const { handle, queen } = await runOrdersPerMinute({ url: b.url, source, sink, queryId: `${source}.q`, seconds: 1, idleFlushMs: 300, onError: (e) => errors.push(e) });
    try {
      // three bursts over ~2.5 s: several windows, some orders filtered out (amount ≤ 0)
      const bursts = [
        [10, 20, -5, 30],
        [1, 0, 2, 3, 4],
        [100, 200],
      ];
      for (const [i, amounts] of bursts.entries()) {
        const res = await b.http('POST', '/api/v1/push', { items: amounts.map((amount) => ({ queue: source, payload: { amount } })) });
        expect(res.status).toBe(201);
        if (i < bursts.length - 1) await sleep(1100);
      }

      // Expected totals from the broker's own createdAt of each order (processing time).
      const orders = await readAll(source, 'expectations');
      expect(orders).toHaveLength(11);
      const pid = orders[0].partitionId as string;
      const expected = new Map<number, { count: number; sum: number }>();
      for (const o of orders) {
        if (!(o.data.amount > 0)) continue;
        const start = Math.floor(Date.parse(o.createdAt) / 1000) * 1000;
        const e = expected.get(start) ?? { count: 0, sum: 0 };
        e.count += 1;
        e.sum += o.data.amount;
        expected.set(start, e);
      }
      expect(expected.size).toBeGreaterThanOrEqual(2);

      // Every window closes: the last ones by the idle flush.
      const deadline = Date.now() + 10000;
      let emitted: any[] = [];
      while (Date.now() < deadline) {
        emitted = await readAll(sink, `check-${Date.now()}`);
        if (emitted.reduce((s, m) => s + m.data.count, 0) >= 9) break;
        await sleep(200);
      }
      await sleep(800);
      emitted = await readAll(sink, 'final');

      // Each window's emit is identified by its deterministic transactionId (PROTOCOL §7.6).
      const txOf = (start: number) =>
        'sx-' + createHash('sha256').update([handle.queryUuid, pid, `tumb:1\u001f${new Date(start).toISOString()}\u001f${pid}`, '0'].join('\u001f')).digest('hex').slice(0, 40);
      const byTx = new Map(emitted.map((m) => [m.transactionId, m.data]));
      expect(emitted).toHaveLength(expected.size);
      for (const [start, totals] of expected) expect(byTx.get(txOf(start)), new Date(start).toISOString()).toEqual(totals);
      expect(emitted.every((m) => m.partition === 'Default')).toBe(true);
      expect(handle.metrics().messagesTotal).toBe(11);
      expect(handle.metrics().flushCyclesTotal).toBeGreaterThanOrEqual(1);
      expect(errors).toEqual([]);
    } finally {
      await handle.stop();
      await queen.close();
    }
  });
});
