import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// A `failed` ack that dead-letters ends the lease, like one below the retry
// limit (PROTOCOL §3.4, §5.5): the consumer that sent it has given the batch
// back, so the messages after the dead-lettered one are poppable at once —
// not after the lease runs out (reported as "dead-letter leaves the
// partition leased"). Every lease here is 60 s, so a test that waited for
// expiry would time out.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

const configure = (queue: string, options: Record<string, unknown>) => b.http('POST', '/api/v1/configure', { queue, options: { leaseTime: 60, ...options } });
const push = (queue: string, n: number) => b.http('POST', '/api/v1/push', { items: Array.from({ length: n }, (_, i) => ({ queue, payload: { n: i + 1 } })) });
const pop = (queue: string, params = '') => b.http('GET', `/api/v1/pop/queue/${queue}?${params}`);
const item = (m: any, status: string) => ({ transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status, error: 'boom' });
const ack = (items: Record<string, unknown>[]) => b.http('POST', '/api/v1/ack/batch', { acknowledgments: items });
const cursorOf = async (queue: string) => (await b.http('GET', `/api/v1/consumer-groups/__QUEUE_MODE__?queue=${queue}`)).body.partitions?.[0]?.cursor;

describe('a dead letter moves the partition on', () => {
  it('a failed ack past retryLimit on the head of a batch ends the lease: the rest of the batch is poppable at once', async () => {
    const q = uniqueName('dl-lease');
    await configure(q, { retryLimit: 0 });
    await push(q, 3);
    const got = await pop(q, 'batch=3');
    expect(got.body.messages).toHaveLength(3);
    const [m1] = got.body.messages;
    const r = await ack([item(m1, 'failed')]);
    expect(r.body[0]).toMatchObject({ success: true, dlq: true, leaseReleased: true });
    expect(await cursorOf(q)).toBe('1');
    const next = await pop(q, 'batch=3');
    expect(next.status).toBe(200);
    expect(next.body.messages.map((m: any) => [m.offset, m.retryCount])).toEqual([
      ['2', 0],
      ['3', 0],
    ]);
    // The lease that gave the batch back is gone: its holder can no longer ack the rest.
    const late = await ack([item(got.body.messages[1], 'completed')]);
    expect(late.body[0]).toMatchObject({ success: false, code: 'LEASE_EXPIRED' });
    expect((await b.http('GET', `/api/v1/dlq?queue=${q}`)).body.total).toBe(1);
  });

  it('after a retried round, the dead-lettering failed ack wakes a parked pop of the same partition', async () => {
    const q = uniqueName('dl-wake');
    await configure(q, { retryLimit: 1 });
    await push(q, 2);
    await ack([item((await pop(q, 'batch=2')).body.messages[0], 'failed')]);
    const again = await pop(q, 'batch=2');
    expect(again.body.messages.map((m: any) => m.retryCount)).toEqual([1, 0]);
    const parked = pop(q, 'batch=2&wait=true&timeout=20000');
    await new Promise((r) => setTimeout(r, 200));
    const started = Date.now();
    expect((await ack([item(again.body.messages[0], 'failed')])).body[0]).toMatchObject({ dlq: true, leaseReleased: true });
    const woken = await parked;
    expect(woken.status).toBe(200);
    expect(woken.body.messages.map((m: any) => m.offset)).toEqual(['2']);
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('items after the dead-lettered one in the same request still apply under the lease they name', async () => {
    const q = uniqueName('dl-same');
    await configure(q, { retryLimit: 0 });
    await push(q, 4);
    const got = await pop(q, 'batch=4');
    const [m1, m2, m3] = got.body.messages;
    const r = await ack([item(m1, 'failed'), item(m2, 'completed'), item(m3, 'completed')]);
    expect(r.body.map((x: any) => [x.success, x.dlq, x.code])).toEqual([
      [true, true, null],
      [true, false, null],
      [true, false, null],
    ]);
    expect(await cursorOf(q)).toBe('3');
    const next = await pop(q, 'batch=4');
    expect(next.body.messages.map((m: any) => m.offset)).toEqual(['4']);
  });

  it('a failed ack past retryLimit on the last message of the lease still ends it (unchanged)', async () => {
    const q = uniqueName('dl-last');
    await configure(q, { retryLimit: 0 });
    await push(q, 2);
    const [m1, m2] = (await pop(q, 'batch=2')).body.messages;
    expect((await ack([item(m1, 'completed')])).body[0]).toMatchObject({ success: true, leaseReleased: false });
    expect((await ack([item(m2, 'failed')])).body[0]).toMatchObject({ success: true, dlq: true, leaseReleased: true });
    expect((await pop(q)).status).toBe(204);
    await push(q, 1);
    expect((await pop(q)).body.messages[0].offset).toBe('3');
  });
});
