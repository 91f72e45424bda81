import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { runOrdersPayments } from './orders-payments.js';

// The README's story, end to end against a real broker: three orders, their
// payments (one of them late), and what the output queue shows.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

async function readAll(queue: string) {
  const out: any[] = [];
  const group = uniqueName('read');
  for (let empty = 0; empty < 2; ) {
    const res = await b.http('GET', `/api/v1/pop/queue/${queue}?batch=500&wait=true&timeout=300&autoAck=true&consumerGroup=${group}`);
    if (res.status === 204) empty += 1;
    else {
      empty = 0;
      out.push(...res.body.messages);
    }
  }
  return out;
}

describe('orders-payments worker', () => {
  it('pairs orders paid within 5 minutes, emits the unpaid one once the payments have moved past it, drops the late payment', async () => {
    const orders = uniqueName('orders');
    const payments = uniqueName('payments');
    const sink = `${orders}.payments`;
    const push = (queue: string, payload: object) => b.http('POST', '/api/v1/push', { items: [{ queue, partition: 'shop-1', payload }] });
    const errors: Error[] = [];
    const { handle, queen } = await runOrdersPayments({ url: b.url, orders, payments, sink, queryId: `${orders}.q`, onError: (e) => errors.push(e) });
    try {
      await push(orders, { orderId: 'A', amount: 30, placedAt: '2026-01-05T10:00:00Z' });
      await push(orders, { orderId: 'B', amount: 12, placedAt: '2026-01-05T10:01:00Z' });
      await push(payments, { paymentId: 'pay-A', orderId: 'A', paidAt: '2026-01-05T10:02:10Z' }); // 2m10s after A: pairs
      await push(payments, { paymentId: 'pay-B', orderId: 'B', paidAt: '2026-01-05T10:07:30Z' }); // 6m30s after B: too late
      await push(orders, { orderId: 'C', amount: 7, placedAt: '2026-01-05T10:09:00Z' });
      await push(payments, { paymentId: 'pay-C', orderId: 'C', paidAt: '2026-01-05T10:09:40Z' }); // pairs; moves the payments past B's bound
      await eventually(async () => (await readAll(sink)).length >= 3, 20_000);
      const shown = (await readAll(sink)).map((m) => m.data).sort((x, y) => x.orderId.localeCompare(y.orderId));
      expect(shown).toEqual([
        { orderId: 'A', amount: 30, paid: true, paymentId: 'pay-A', paidAt: '2026-01-05T10:02:10Z' },
        { orderId: 'B', amount: 12, paid: false, paymentId: null, paidAt: null },
        { orderId: 'C', amount: 7, paid: true, paymentId: 'pay-C', paidAt: '2026-01-05T10:09:40Z' },
      ]);
      expect(errors).toEqual([]);
      expect(handle.metrics().messagesTotal).toBe(6);
    } finally {
      await handle.stop();
      await queen.close();
    }
  });
});
