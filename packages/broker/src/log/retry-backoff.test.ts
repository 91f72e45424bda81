import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleep, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// Retry backoff (PROTOCOL §3.5): a queue's retryDelay keeps a failed
// message from its consumer group for that long, and the partition waits
// behind it (order per partition); without retryDelay redelivery is at once.
// Over real HTTP against a real PostgreSQL.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

const configure = (queue: string, options: object) => b.http('POST', '/api/v1/configure', { queue, options });
const push = (queue: string, partition: string, payloads: unknown[]) =>
  b.http('POST', '/api/v1/push', { items: payloads.map((payload) => ({ queue, partition, payload })) });

/** A pop of the queue that does not wait; `group` null: queue mode. */
async function pop(queue: string, group: string | null, query = ''): Promise<any[]> {
  const g = group ? `&consumerGroup=${group}` : '';
  const r = await b.http('GET', `/api/v1/pop/queue/${queue}?batch=10${g}${query}`);
  return r.status === 204 ? [] : r.body.messages;
}

/** Acks one message; its result. */
async function ackOne(m: any, group: string | null, status: 'completed' | 'failed'): Promise<any> {
  const r = await b.http('POST', '/api/v1/ack', {
    transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status,
    ...(group ? { consumerGroup: group } : {}),
  });
  expect(r.status).toBe(200);
  return r.body[0];
}

/** Fails the message, then pops until it is back: how long that took (ms) and what came back. */
async function failAndWait(queue: string, group: string | null, m: any, limitMs = 5000): Promise<{ ms: number; again: any[]; ack: any }> {
  const ack = await ackOne(m, group, 'failed');
  expect(ack).toMatchObject({ success: true, dlq: false });
  const t0 = Date.now();
  for (;;) {
    const again = await pop(queue, group);
    if (again.length > 0) return { ms: Date.now() - t0, again, ack };
    if (Date.now() - t0 > limitMs) throw new Error(`not redelivered within ${limitMs} ms`);
    await sleep(20);
  }
}

describe('retry backoff', () => {
  for (const group of ['workers', null]) {
    it(`retryDelay 500: a failed message comes back after ~500 ms, first, its partition waits behind it, other partitions do not (${group ? 'consumer group' : 'queue mode'})`, async () => {
      const q = uniqueName('rb-fixed');
      expect((await configure(q, { retryDelay: 500, retryLimit: 5 })).body.options).toMatchObject({ retryDelay: 500, retryBackoff: 'fixed' });
      await push(q, 'a', ['a1', 'a2', 'a3']);
      const first = await pop(q, group, '&partition=a');
      expect(first.map((m) => m.data)).toEqual(['a1', 'a2', 'a3']);

      // The delay runs from the ack's transaction, which starts after sentAt and before failedAt.
      const sentAt = Date.now();
      const ack = await ackOne(first[0], group, 'failed');
      const failedAt = Date.now();
      expect(ack).toMatchObject({ success: true, dlq: false, leaseReleased: true });
      // 500 ms from the ack's transaction start, which is after sentAt (one clock: the test's machine).
      expect(Date.parse(ack.retryAt) - sentAt).toBeGreaterThanOrEqual(495);
      expect(Date.parse(ack.retryAt) - failedAt).toBeLessThanOrEqual(500);

      // Meanwhile: partition a gives nothing to the group, not even a2 (order
      // per partition); a push to partition b is popped at once.
      await push(q, 'b', ['b1']);
      const meanwhile = await pop(q, group);
      expect(meanwhile.map((m) => m.data)).toEqual(['b1']);
      await ackOne(meanwhile[0], group, 'completed');
      expect(await pop(q, group)).toEqual([]);
      expect(await b.http('GET', `/api/v1/pop/queue/${q}/partition/a?batch=10${group ? `&consumerGroup=${group}` : ''}`).then((r) => r.status)).toBe(204);
      await sleep(Math.max(0, failedAt + 350 - Date.now()));
      expect(await pop(q, group)).toEqual([]);

      // Then the failed message is the first one redelivered, the rest behind it.
      let again: any[] = [];
      while (again.length === 0 && Date.now() - failedAt < 3000) {
        again = await pop(q, group);
        if (again.length === 0) await sleep(20);
      }
      expect(Date.now() - sentAt).toBeGreaterThanOrEqual(495);
      expect(Date.now() - failedAt).toBeLessThan(1000);
      expect(again.map((m) => [m.data, m.retryCount])).toEqual([['a1', 1], ['a2', 0], ['a3', 0]]);
    });
  }

  it('another consumer group is not held back by one group failing', async () => {
    const q = uniqueName('rb-groups');
    await configure(q, { retryDelay: 2000 });
    await push(q, 'p', ['m1']);
    const [m] = await pop(q, 'g1');
    await ackOne(m, 'g1', 'failed');
    expect((await pop(q, 'g2')).map((x) => x.data)).toEqual(['m1']);
    expect(await pop(q, 'g1')).toEqual([]);
  });

  it('exponential backoff grows per retry and is capped by retryDelayMax; retryCount counts; dead-lettering after retryLimit is unchanged', async () => {
    const q = uniqueName('rb-exp');
    const configured = await configure(q, { retryDelay: 150, retryBackoff: 'exponential', retryDelayMax: 700, retryLimit: 4 });
    expect(configured.body.options).toMatchObject({ retryDelay: 150, retryBackoff: 'exponential', retryDelayMax: 700 });
    await push(q, 'p', ['x']);
    let [m] = await pop(q, 'g');
    const waits: number[] = [];
    const planned: number[] = [];
    for (let failure = 1; failure <= 4; failure++) {
      const before = Date.now();
      const { ms, again, ack } = await failAndWait(q, 'g', m);
      planned.push(Date.parse(ack.retryAt) - before);
      waits.push(ms);
      expect(again.map((x: any) => [x.data, x.retryCount])).toEqual([['x', failure]]);
      m = again[0];
    }
    console.log(`exponential retry waits (ms): planned ${planned.join(', ')}, observed ${waits.join(', ')}`);
    // Nominal 150, 300, 600, 1200 -> capped at 700; jitter adds up to a quarter, within the cap.
    const nominal = [150, 300, 600, 700];
    nominal.forEach((n, i) => {
      expect(waits[i]).toBeGreaterThanOrEqual(n - 40);
      expect(planned[i]).toBeLessThanOrEqual(Math.min(n * 1.25, 700) + 100);
    });
    expect(waits[1]).toBeGreaterThan(waits[0]!);
    expect(waits[2]).toBeGreaterThan(waits[1]!);
    expect(planned[3]).toBeLessThanOrEqual(800); // nominal 1200, bounded by 700 (+ the request's own time)
    // The fifth failure passes retryLimit 4: dead-lettered at once, the partition moves on.
    const dead = await ackOne(m, 'g', 'failed');
    expect(dead).toMatchObject({ success: true, dlq: true });
    expect(dead.retryAt).toBeUndefined();
  });

  it('without retryDelay a failed message is redelivered at once, as before (the stored default 1000 is not applied)', async () => {
    const q = uniqueName('rb-none');
    const configured = await configure(q, { retryLimit: 5 });
    expect(configured.body.options.retryDelay).toBe(1000);
    await push(q, 'p', ['y']);
    const [m] = await pop(q, 'g');
    const ack = await ackOne(m, 'g', 'failed');
    expect(ack.retryAt).toBeUndefined();
    const again = await pop(q, 'g');
    expect(again.map((x) => [x.data, x.retryCount])).toEqual([['y', 1]]);
    // null puts retryDelay back to "not set": immediate again.
    await configure(q, { retryDelay: 400 });
    expect((await configure(q, { retryDelay: null })).body.options.retryDelay).toBe(1000);
    await ackOne(again[0], 'g', 'failed');
    expect((await pop(q, 'g')).map((x) => x.retryCount)).toEqual([2]);
  });

  it('a parked pop is answered when the delay expires', async () => {
    const latencies: number[] = [];
    for (let round = 0; round < 3; round++) {
      const q = uniqueName('rb-park');
      await configure(q, { retryDelay: 700 });
      await push(q, 'p', ['z']);
      const [m] = await pop(q, 'g');
      const ack = await ackOne(m, 'g', 'failed');
      const due = Date.parse(ack.retryAt);
      const parked = await b.http('GET', `/api/v1/pop/queue/${q}?consumerGroup=g&wait=true&timeout=5000`);
      const answered = Date.now();
      expect(parked.status).toBe(200);
      expect(parked.body.messages.map((x: any) => [x.data, x.retryCount])).toEqual([['z', 1]]);
      expect(answered).toBeGreaterThanOrEqual(due - 5);
      latencies.push(answered - due);
    }
    console.log(`parked pop answered after the retry delay passed (ms): ${latencies.join(', ')}`);
    // The 1 s re-check alone would answer up to a second late.
    for (const ms of latencies) expect(ms).toBeLessThan(150);
  });

  it('a seek ends a running retry delay, as it ends the lease', async () => {
    const q = uniqueName('rb-seek');
    await configure(q, { retryDelay: 60000 });
    await push(q, 'p', ['s1', 's2']);
    const [m] = await pop(q, 'g');
    await ackOne(m, 'g', 'failed');
    expect(await pop(q, 'g')).toEqual([]);
    const seek = await b.http('POST', `/api/v1/consumer-groups/g/queues/${q}/seek`, { timestamp: '2020-01-01T00:00:00Z' });
    expect(seek.status).toBe(200);
    expect((await pop(q, 'g')).map((x) => x.data)).toEqual(['s1', 's2']);
  });

  it('rejects a retryBackoff it does not know with a 400', async () => {
    const r = await configure(uniqueName('rb-bad'), { retryBackoff: 'linear' });
    expect(r.status).toBe(400);
    expect(r.body.code).toBe('VALIDATION_FAILED');
  });
});
