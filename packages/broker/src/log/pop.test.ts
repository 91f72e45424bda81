import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleep, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// Pop and leases (PROTOCOL §3.3, §3.4, §5.4, §5.6) over real HTTP.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

const push = (items: unknown[]) => b.http('POST', '/api/v1/push', { items });
const pushN = (queue: string, partition: string, n: number, from = 0) =>
  push(Array.from({ length: n }, (_, i) => ({ queue, partition, payload: { i: from + i } })));
const pop = (queue: string, qs = '', partition?: string) =>
  b.http('GET', `/api/v1/pop/queue/${encodeURIComponent(queue)}${partition ? `/partition/${encodeURIComponent(partition)}` : ''}${qs ? `?${qs}` : ''}`);
const setOptions = (queue: string, options: Record<string, unknown>) =>
  b.sql.query('update queen.queues set options = options || $2::jsonb where name = $1', [queue, JSON.stringify(options)]);

async function groupPartition(group: string, queue: string, partition: string) {
  const r = await b.http('GET', `/api/v1/consumer-groups/${encodeURIComponent(group)}?queue=${encodeURIComponent(queue)}`);
  if (r.status !== 200) return undefined;
  return (r.body.partitions as any[]).find((p) => p.partition === partition);
}

describe('pop', () => {
  it('B11 FIFO: one at a time and in one batch', async () => {
    const q = uniqueName('b11');
    for (let i = 0; i < 100; i++) expect((await push([{ queue: q, partition: 'p', payload: { i } }])).status).toBe(201);
    const seen: [number, string][] = [];
    for (;;) {
      const r = await pop(q, 'batch=1');
      if (r.status === 204) break;
      expect(r.body.messages).toHaveLength(1);
      const m = r.body.messages[0];
      seen.push([m.data.i, m.offset]);
      const ack = await b.http('POST', '/api/v1/ack', { transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId });
      expect(ack.body[0]).toMatchObject({ success: true, leaseReleased: true });
    }
    expect(seen).toEqual(Array.from({ length: 100 }, (_, i) => [i, String(i + 1)]));

    const all = await pop(q, 'batch=100&consumerGroup=other');
    expect(all.body.messages.map((m: any) => m.data.i)).toEqual(Array.from({ length: 100 }, (_, i) => i));
    expect(all.body.messages.map((m: any) => m.offset)).toEqual(Array.from({ length: 100 }, (_, i) => String(i + 1)));
  });

  it('B12 empty pops answer 204 quickly and create nothing', async () => {
    const empty = uniqueName('b12e');
    await push([{ queue: empty, partition: 'p', payload: 1 }]);
    await pop(empty, 'autoAck=true');
    const unknown = uniqueName('b12u');
    for (const [queue, partition] of [
      [empty, undefined],
      [unknown, undefined],
      [empty, 'nope'],
      [unknown, 'nope'],
    ] as const) {
      const t0 = Date.now();
      const r = await pop(queue, 'wait=false', partition);
      expect(r.status).toBe(204);
      expect(r.body).toBeUndefined();
      expect(Date.now() - t0).toBeLessThan(500);
    }
    expect((await b.http('GET', `/api/v1/resources/queues/${unknown}`)).status).toBe(404);
    const q = await b.http('GET', `/api/v1/resources/queues/${empty}`);
    expect(q.body.partitions.map((p: any) => p.name)).toEqual(['p']);
    // Only the autoAck pop's cursor exists; the empty pops added no partition or cursor.
    const { rows } = await b.sql.query('select count(*)::int as n from queen.cursors c join queen.partitions p on p.id = c.partition_id where p.queue_name = $1', [empty]);
    expect(rows[0].n).toBe(1);
  });

  it('B15 a lease is exclusive per group', async () => {
    const q = uniqueName('b15');
    await pushN(q, 'p', 1);
    const first = await pop(q, 'batch=1');
    expect(first.status).toBe(200);
    const m = first.body.messages[0];
    expect(first.body.leaseId).toMatch(/^[0-9a-f-]{36}$/);
    expect((await pop(q, 'batch=1')).status).toBe(204);
    expect((await pop(q, 'batch=1', 'p')).status).toBe(204);
    const g2 = await pop(q, 'batch=1&consumerGroup=G2');
    expect(g2.status).toBe(200);
    expect(g2.body.messages[0]).toMatchObject({ id: m.id, offset: '1', consumerGroup: 'G2' });
    expect(g2.body.leaseId).not.toBe(first.body.leaseId);
    expect(await groupPartition('__QUEUE_MODE__', q, 'p')).toMatchObject({ leased: true, cursor: '0' });
  });

  it('B16 an expired lease cannot be used; the message comes back uncharged', async () => {
    const q = uniqueName('b16');
    await pushN(q, 'p', 1);
    await setOptions(q, { leaseTime: 1 });
    const first = await pop(q);
    const m = first.body.messages[0];
    const L1 = first.body.leaseId;
    expect(m.retryCount).toBe(0);
    await sleep(2000);
    const ext = await b.http('POST', `/api/v1/lease/${L1}/extend`, { seconds: 30 });
    expect(ext.status).toBe(200);
    expect(ext.body[0]).toMatchObject({ index: 0, leaseId: L1, success: false, code: 'LEASE_EXPIRED' });
    const ack = await b.http('POST', '/api/v1/ack', { transactionId: m.transactionId, partitionId: m.partitionId, leaseId: L1 });
    expect(ack.body[0]).toMatchObject({ success: false, code: 'LEASE_EXPIRED' });

    const again = await pop(q);
    expect(again.status).toBe(200);
    expect(again.body.messages[0]).toMatchObject({ transactionId: m.transactionId, offset: m.offset, retryCount: 0 });
    expect(again.body.leaseId).not.toBe(L1);
    const stale = await b.http('POST', '/api/v1/ack', { transactionId: m.transactionId, partitionId: m.partitionId, leaseId: L1 });
    expect(stale.body[0]).toMatchObject({ success: false, code: 'LEASE_EXPIRED' });
    const random = await b.http('POST', `/api/v1/lease/${crypto.randomUUID()}/extend`, {});
    expect(random.body[0]).toMatchObject({ success: false, code: 'LEASE_NOT_FOUND', error: 'Lease not found' });
    // The live lease still works.
    const ok = await b.http('POST', '/api/v1/ack', { transactionId: m.transactionId, partitionId: m.partitionId, leaseId: again.body.leaseId });
    expect(ok.body[0]).toMatchObject({ success: true, leaseReleased: true });
  });

  it('B26 server autoAck moves the cursor and takes no lease', async () => {
    const q = uniqueName('b26');
    await pushN(q, 'p', 3);
    await setOptions(q, { leaseTime: 1 });
    const r = await pop(q, 'autoAck=true&batch=10');
    expect(r.status).toBe(200);
    expect(r.body.leaseId).toBe('');
    expect(r.body.messages).toHaveLength(3);
    for (const m of r.body.messages) expect(m.leaseId).toBe('');
    expect(await groupPartition('__QUEUE_MODE__', q, 'p')).toMatchObject({ cursor: '3', leased: false });
    await sleep(1300);
    expect((await pop(q, 'batch=10')).status).toBe(204);
  });

  it('B27 multi-partition pop shares one lease; extend and ack cover all partitions', async () => {
    const q = uniqueName('b27');
    for (const p of ['a', 'b', 'c']) await pushN(q, p, 2);
    const r = await pop(q, 'partitions=3&batch=100');
    expect(r.status).toBe(200);
    expect(r.body.partitionsClaimed).toBe(3);
    const msgs = r.body.messages as any[];
    expect(msgs).toHaveLength(6);
    expect(new Set(msgs.map((m) => m.partitionId)).size).toBe(3);
    expect(new Set(msgs.map((m) => m.leaseId))).toEqual(new Set([r.body.leaseId]));
    // Grouped by partition, ascending offset inside each.
    for (let i = 0; i < 6; i += 2) {
      expect(msgs[i].partitionId).toBe(msgs[i + 1].partitionId);
      expect([msgs[i].offset, msgs[i + 1].offset]).toEqual(['1', '2']);
    }
    expect(r.body.partitionId).toBe(msgs[0].partitionId);
    expect(r.body.partition).toBe(msgs[0].partition);

    const before = await Promise.all(['a', 'b', 'c'].map((p) => groupPartition('__QUEUE_MODE__', q, p)));
    const ext = await b.http('POST', `/api/v1/lease/${r.body.leaseId}/extend`, { seconds: 3600 });
    expect(ext.body).toHaveLength(1);
    expect(ext.body[0]).toMatchObject({ success: true, leaseId: r.body.leaseId });
    const after = await Promise.all(['a', 'b', 'c'].map((p) => groupPartition('__QUEUE_MODE__', q, p)));
    for (let i = 0; i < 3; i++) {
      expect(Date.parse(after[i].leaseExpiresAt)).toBeGreaterThan(Date.parse(before[i].leaseExpiresAt) + 3000_000);
    }
    expect(Date.parse(ext.body[0].expiresAt)).toBeGreaterThan(Date.now() + 3500_000);

    const ack = await b.http('POST', '/api/v1/ack/batch', {
      acknowledgments: msgs.map((m) => ({ transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId })),
    });
    expect(ack.body.map((x: any) => x.success)).toEqual(Array(6).fill(true));
    expect(ack.body.filter((x: any) => x.leaseReleased)).toHaveLength(3);
    for (const p of ['a', 'b', 'c']) expect(await groupPartition('__QUEUE_MODE__', q, p)).toMatchObject({ cursor: '2', leased: false });
  });

  it('B28 batch caps the total across partitions; default claims one partition', async () => {
    const q = uniqueName('b28');
    for (const p of ['a', 'b', 'c', 'd', 'e']) await pushN(q, p, 100);
    const r = await pop(q, 'partitions=5&batch=10');
    expect(r.body.messages).toHaveLength(10);

    const q2 = uniqueName('b28b');
    for (const p of ['a', 'b', 'c', 'd']) await pushN(q2, p, 5);
    const r2 = await pop(q2, 'batch=100');
    expect(r2.body.messages).toHaveLength(5);
    expect(new Set(r2.body.messages.map((m: any) => m.partitionId)).size).toBe(1);
    expect(r2.body.partitionsClaimed).toBe(1);
  });

  it('concurrent consumers of one group never receive a message twice', async () => {
    const q = uniqueName('compete');
    const parts = Array.from({ length: 10 }, (_, i) => `p${i}`);
    for (const p of parts) await pushN(q, p, 50);
    const seen = new Map<string, number>();
    const lastOffset = new Map<string, number>();
    let idle = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (seen.size < 500 && idle < 200) {
          const r = await pop(q, 'batch=7&partitions=2');
          expect([200, 204]).toContain(r.status);
          if (r.status === 204) {
            idle++;
            await sleep(5);
            continue;
          }
          for (const m of r.body.messages) {
            seen.set(m.id, (seen.get(m.id) ?? 0) + 1);
            expect(Number(m.offset)).toBeGreaterThan(lastOffset.get(m.partitionId) ?? 0);
            lastOffset.set(m.partitionId, Number(m.offset));
          }
          const ack = await b.http('POST', '/api/v1/ack/batch', {
            acknowledgments: r.body.messages.map((m: any) => ({ transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId })),
          });
          expect(ack.status).toBe(200);
          expect(ack.body.every((x: any) => x.success)).toBe(true);
        }
      }),
    );
    expect(seen.size).toBe(500);
    expect([...seen.values()].every((n) => n === 1)).toBe(true);
  });

  it("wildcard pop prefers the partition whose oldest pending message is oldest (claimOrder 'oldest')", async () => {
    const q = uniqueName('order');
    expect((await b.http('POST', '/api/v1/configure', { queue: q, options: { claimOrder: 'oldest' } })).status).toBe(200);
    await pushN(q, 'later', 1);
    await pushN(q, 'earlier', 1);
    await b.sql.query(`update queen.messages set created_at = created_at - interval '1 hour' where partition_id = (select id from queen.partitions where queue_name = $1 and name = 'earlier')`, [q]);
    const r = await pop(q);
    expect(r.body.partition).toBe('earlier');
  });

  it('answers each field as it was pushed, whatever characters it holds, traced or not (the broker writes the JSON)', async () => {
    const q = uniqueName('b-fields');
    // Quotes, backslashes, non-ASCII, an astral character and U+2028 in the
    // names a client chooses; payloads of every JSON kind, null included.
    const partition = 'p "q" \\ é 😀 \u2028 end';
    const items = [
      { queue: q, partition, transactionId: 'tx "1" \\ é 😀 \u2028', payload: { s: 'a "b" \\ \n \u0001 😀', n: 1.5, t: true, z: null, l: [1, 'x'] } },
      { queue: q, partition, payload: null },
      { queue: q, partition, payload: 'plain string' },
      { queue: q, partition, payload: 42, traceId: '0195f0c2-aaaa-7bbb-8ccc-0123456789ab', traceparent: '00-0123456789abcdef0123456789abcdef-0123456789abcdef-01' },
      { queue: q, partition, transactionId: 'last', payload: [] },
    ];
    const pushed = await push(items);
    expect(pushed.status).toBe(201);
    const r = await pop(q, 'batch=10');
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ success: true, queue: q, partition, partitionsClaimed: 1 });
    const ms = r.body.messages as any[];
    expect(ms).toHaveLength(5);
    ms.forEach((m, i) => {
      const item = items[i]! as any;
      expect(Object.keys(m)).toEqual(['id', 'transactionId', 'traceId', 'traceparent', 'data', 'producerSub', 'createdAt', 'partitionId', 'partition', 'queue', 'leaseId', 'consumerGroup', 'offset', 'retryCount']);
      expect(m).toEqual({
        id: pushed.body[i].message_id,
        transactionId: item.transactionId ?? pushed.body[i].message_id,
        traceId: item.traceId ?? null,
        traceparent: item.traceparent ?? null,
        data: item.payload,
        producerSub: null,
        createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/),
        partitionId: r.body.partitionId,
        partition,
        queue: q,
        leaseId: r.body.leaseId,
        consumerGroup: '__QUEUE_MODE__',
        offset: String(i + 1),
        retryCount: 0,
      });
    });
  });
});
