import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, sleep, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// Retries, DLQ and visibility (PROTOCOL §3.5, §3.7) as configured through
// /api/v1/configure, over real HTTP on a real PostgreSQL.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

const configure = (queue: string, options: Record<string, unknown>) => b.http('POST', '/api/v1/configure', { queue, options });
const push = (queue: string, items: Record<string, unknown>[]) => b.http('POST', '/api/v1/push', { items: items.map((i) => ({ queue, ...i })) });
const pop = (queue: string, params = '') => b.http('GET', `/api/v1/pop/queue/${queue}?${params}`);
const many = (n: number) => Array.from({ length: n }, (_, i) => ({ payload: { i } }));
const ackAll = (messages: any[], status: string, extra: Record<string, unknown> = {}) =>
  b.http('POST', '/api/v1/ack/batch', {
    acknowledgments: messages.map((m) => ({ transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status, ...extra })),
  });
const cursorOf = async (queue: string, g = '__QUEUE_MODE__') =>
  (await b.http('GET', `/api/v1/consumer-groups/${g}?queue=${queue}`)).body.partitions?.[0]?.cursor;
const dlqOf = async (queue: string) => (await b.http('GET', `/api/v1/dlq?queue=${queue}`)).body;

describe('retries and DLQ', () => {
  it('B21 retry then success: failed rounds redeliver the same batch, DLQ stays empty', async () => {
    const q = uniqueName('b21');
    await configure(q, { retryLimit: 3 });
    await push(q, many(10));
    let deliveries = 0;
    for (let round = 0; round < 2; round++) {
      const got = await pop(q, 'batch=10');
      deliveries++;
      expect(got.body.messages.map((m: any) => m.offset)).toEqual(['1', '2', '3', '4', '5', '6', '7', '8', '9', '10']);
      expect(got.body.messages.every((m: any) => m.retryCount === round)).toBe(true);
      const acked = await ackAll(got.body.messages, 'failed');
      expect(acked.body.every((r: any) => r.success && !r.dlq)).toBe(true);
    }
    const last = await pop(q, 'batch=10');
    deliveries++;
    expect(last.body.messages).toHaveLength(10);
    expect((await ackAll(last.body.messages, 'completed')).body.every((r: any) => r.success)).toBe(true);
    expect(deliveries).toBe(3);
    expect((await dlqOf(q)).total).toBe(0);
    expect(await cursorOf(q)).toBe('10');
  });

  it('B21 with retryLimit 1 the second failed round dead-letters all 10', async () => {
    const q = uniqueName('b21b');
    await configure(q, { retryLimit: 1 });
    await push(q, many(10));
    const first = await pop(q, 'batch=10');
    await ackAll(first.body.messages, 'failed');
    const second = await pop(q, 'batch=10');
    expect(second.body.messages).toHaveLength(10);
    const r = await ackAll(second.body.messages, 'failed');
    expect(r.body.every((x: any) => x.success && x.dlq)).toBe(true);
    expect((await dlqOf(q)).total).toBe(10);
    expect(await cursorOf(q)).toBe('10');
    expect((await pop(q)).status).toBe(204);
  });

  it('B22 exhausted and explicit DLQ; retry redelivers without a charge', async () => {
    const q = uniqueName('b22');
    await configure(q, { retryLimit: 1 });
    await push(q, [{ payload: { n: 1 } }, { payload: { n: 2 } }, { payload: { n: 3 } }]);
    const one = await pop(q);
    const f1 = await ackAll(one.body.messages, 'failed', { error: 'boom' });
    expect(f1.body[0]).toMatchObject({ success: true, dlq: false, leaseReleased: true });
    const again = await pop(q);
    expect(again.body.messages[0]).toMatchObject({ offset: '1', retryCount: 1 });
    const f2 = await ackAll(again.body.messages, 'failed', { error: 'boom' });
    expect(f2.body[0]).toMatchObject({ success: true, dlq: true });
    const dlq = await dlqOf(q);
    expect(dlq.total).toBe(1);
    expect(dlq.messages[0]).toMatchObject({
      transactionId: one.body.messages[0].transactionId,
      id: one.body.messages[0].id,
      data: { n: 1 },
      errorMessage: 'boom',
      consumerGroup: '__QUEUE_MODE__',
      retryCount: 2,
      offset: '1',
      queue: q,
      partition: 'Default',
    });

    const m2 = await pop(q);
    expect(m2.body.messages[0].offset).toBe('2');
    expect((await ackAll(m2.body.messages, 'dlq')).body[0]).toMatchObject({ success: true, dlq: true });
    expect((await dlqOf(q)).total).toBe(2);

    const m3 = await pop(q);
    expect(m3.body.messages[0]).toMatchObject({ offset: '3', retryCount: 0 });
    expect((await ackAll(m3.body.messages, 'retry')).body[0]).toMatchObject({ success: true, dlq: false, leaseReleased: true });
    const m3again = await pop(q);
    expect(m3again.body.messages[0]).toMatchObject({ offset: '3', retryCount: 0 });
  });

  it('B23 poison by expiry is opt-in (leaseExpiryCountsAsFailure)', async () => {
    const poison = uniqueName('b23p');
    const plain = uniqueName('b23n');
    await configure(poison, { retryLimit: 2, leaseTime: 1, leaseExpiryCountsAsFailure: true });
    await configure(plain, { retryLimit: 2, leaseTime: 1 });
    for (const q of [poison, plain]) await push(q, [{ payload: 'm1' }, { payload: 'm2' }]);
    for (let round = 0; round < 3; round++) {
      const [p, n] = await Promise.all([pop(poison), pop(plain)]);
      expect(p.body.messages[0]).toMatchObject({ data: 'm1', retryCount: round });
      expect(n.body.messages[0]).toMatchObject({ data: 'm1', retryCount: 0 });
      await sleep(1500);
    }
    const next = await pop(poison);
    expect(next.body.messages[0]).toMatchObject({ data: 'm2', retryCount: 0 });
    const dlq = await dlqOf(poison);
    expect(dlq.total).toBe(1);
    expect(dlq.messages[0].data).toBe('m1');
    expect(dlq.messages[0].errorMessage).toContain('Lease expired');
    expect((await pop(plain)).body.messages[0]).toMatchObject({ data: 'm1', retryCount: 0 });
    expect((await dlqOf(plain)).total).toBe(0);
  });

  it('B24 failure counts are per message', async () => {
    const q = uniqueName('b24');
    await configure(q, { retryLimit: 1 });
    await push(q, [{ payload: 'm1' }, { payload: 'm2' }]);
    for (let i = 0; i < 2; i++) await ackAll((await pop(q)).body.messages, 'failed');
    expect((await dlqOf(q)).total).toBe(1);
    const m2 = await pop(q);
    expect(m2.body.messages[0]).toMatchObject({ data: 'm2', retryCount: 0 });
    const r = await ackAll(m2.body.messages, 'failed');
    expect(r.body[0]).toMatchObject({ success: true, dlq: false });
    const again = await pop(q);
    expect(again.body.messages[0]).toMatchObject({ data: 'm2', retryCount: 1 });
    expect((await dlqOf(q)).total).toBe(1);
  });

  it('B25 a failed item blocks the completed items after it', async () => {
    const q = uniqueName('b25');
    await push(q, many(3));
    const got = await pop(q, 'batch=3');
    const [o1, o2, o3] = got.body.messages;
    const r = await b.http('POST', '/api/v1/ack/batch', {
      acknowledgments: [
        { transactionId: o1.transactionId, partitionId: o1.partitionId, leaseId: o1.leaseId, status: 'completed' },
        { transactionId: o2.transactionId, partitionId: o2.partitionId, leaseId: o2.leaseId, status: 'failed' },
        { transactionId: o3.transactionId, partitionId: o3.partitionId, leaseId: o3.leaseId, status: 'completed' },
      ],
    });
    expect(r.body[0]).toMatchObject({ success: true });
    expect(r.body[1]).toMatchObject({ success: true, dlq: false });
    expect(r.body[2]).toMatchObject({ success: false, code: 'ACK_BLOCKED' });
    expect(await cursorOf(q)).toBe('1');
    const next = await pop(q, 'batch=10');
    expect(next.body.messages.map((m: any) => [m.offset, m.retryCount])).toEqual([
      ['2', 1],
      ['3', 0],
    ]);
  });
});

describe('visibility', () => {
  it('B38 delayedProcessing hides a message until createdAt + delay', async () => {
    const q = uniqueName('b38d');
    await configure(q, { delayedProcessing: 2 });
    const pushedAt = Date.now();
    await push(q, many(1));
    expect((await pop(q)).status).toBe(204);
    const got = await eventually(async () => {
      const r = await pop(q);
      return r.status === 200 ? r : undefined;
    }, 6000, 100);
    const waited = Date.now() - pushedAt;
    expect(waited).toBeGreaterThanOrEqual(1900);
    expect(waited).toBeLessThan(4500);
    expect(got.body.messages).toHaveLength(1);
  });

  it('B38 windowBuffer holds a partition until its newest message is N s old', async () => {
    const q = uniqueName('b38w');
    await configure(q, { windowBuffer: 2 });
    for (let i = 0; i < 3; i++) {
      await push(q, [{ payload: { i } }]);
      if (i < 2) await sleep(500);
    }
    const lastPush = Date.now();
    expect((await pop(q, 'batch=10')).status).toBe(204);
    await sleep(1000);
    expect((await pop(q, 'batch=10')).status).toBe(204);
    const got = await eventually(async () => {
      const r = await pop(q, 'batch=10');
      return r.status === 200 ? r : undefined;
    }, 6000, 100);
    expect(Date.now() - lastPush).toBeGreaterThanOrEqual(1900);
    expect(got.body.messages.map((m: any) => m.data.i)).toEqual([0, 1, 2]);
  });
});
