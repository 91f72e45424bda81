import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleep, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { kvBrokerFeature } from './broker.js';

// A stream cycle's `kv_reads` (a lookup, PROTOCOL §7.4 extension): the KV
// versions a cycle's outputs were computed from, locked shared before the
// cycle's own locks and checked in its transaction.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker({ ...kvBrokerFeature() });
});
afterAll(async () => b?.stop());

const put = async (ns: string, key: string, value: unknown) => {
  const res = await b.http('PUT', `/api/v1/kv/${ns}/${key}`, { value });
  expect(res.status).toBeLessThan(300);
  return (await b.http('GET', `/api/v1/kv/${ns}/${key}`)).body.version as number;
};

async function leasedBatch() {
  const src = uniqueName('lk-src');
  expect((await b.http('POST', '/api/v1/push', { items: [{ queue: src, partition: 'p', payload: 1 }] })).status).toBe(201);
  const reg = await b.http('POST', '/streams/v1/queries', { name: uniqueName('lk'), source_queue: src, config_hash: 'h' });
  const m = (await b.http('GET', `/api/v1/pop/queue/${src}?batch=1&wait=false`)).body.messages[0];
  return { src, qid: reg.body.query_id as string, m };
}

const cycle = (s: Awaited<ReturnType<typeof leasedBatch>>, sink: string, kv_reads: unknown[]) =>
  b.http('POST', '/streams/v1/cycle', {
    query_id: s.qid,
    partition_id: s.m.partitionId,
    push_items: [{ queue: sink, partition: 'p', payload: 'enriched', transactionId: 'e-1' }],
    ack: { transactionId: s.m.transactionId, leaseId: s.m.leaseId },
    kv_reads,
  });

const stored = async (queue: string) =>
  (await b.sql.query('select count(*)::int as n from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1', [queue])).rows[0].n;

describe('cycle kv_reads (lookups)', () => {
  it('commits when every read version is still the live one (0: absent)', async () => {
    const ns = uniqueName('ns').replace(/[^A-Za-z0-9._:-]/g, '');
    const v = await put(ns, 'c1', { tier: 'gold' });
    const s = await leasedBatch();
    const sink = uniqueName('lk-sink');
    const res = await cycle(s, sink, [{ namespace: ns, key: 'c1', version: v }, { namespace: ns, key: 'none', version: 0 }]);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ success: true, ack_result: { count: 1 } });
    expect(await stored(sink)).toBe(1);
  });

  it('a version changed (or a key created) since the read fails the element VERSION_CONFLICT on kv:<ns>/<key>; nothing applied', async () => {
    const ns = uniqueName('ns').replace(/[^A-Za-z0-9._:-]/g, '');
    const v1 = await put(ns, 'c1', 1);
    const v2 = await put(ns, 'c1', 2);
    const s = await leasedBatch();
    const sink = uniqueName('lk-sink');
    const stale = await cycle(s, sink, [{ namespace: ns, key: 'c1', version: v1 }]);
    expect(stale.body).toMatchObject({ success: false, code: 'VERSION_CONFLICT', key: `kv:${ns}/c1`, currentVersion: v2, ack_result: null });
    await put(ns, 'c2', 'new');
    const created = await cycle(s, sink, [{ namespace: ns, key: 'c1', version: v2 }, { namespace: ns, key: 'c2', version: 0 }]);
    expect(created.body).toMatchObject({ success: false, code: 'VERSION_CONFLICT', key: `kv:${ns}/c2` });
    expect(await stored(sink)).toBe(0);
    const { rows } = await b.sql.query(`select c.cursor_offset::int as c from queen.cursors c join queen.partitions p on p.id = c.partition_id where p.queue_name = $1`, [s.src]);
    expect(rows[0]?.c ?? 0).toBe(0);
    // The same cycle with the live versions commits.
    expect((await cycle(s, sink, [{ namespace: ns, key: 'c1', version: v2 }])).body.success).toBe(true);
  });

  it("a KV write to a read key waits for the cycle's transaction (the lock is held to commit)", async () => {
    const ns = uniqueName('ns').replace(/[^A-Za-z0-9._:-]/g, '');
    const v = await put(ns, 'c1', 1);
    const client = await b.sql.connect();
    try {
      await client.query('begin');
      await client.query('select queen.kv_read_lock_v1($1::jsonb)', [JSON.stringify([{ kv_reads: [{ namespace: ns, key: 'c1', version: v }] }])]);
      let done = false;
      const write = b.http('PUT', `/api/v1/kv/${ns}/c1`, { value: 2 }).then((r) => ((done = true), r));
      await sleep(500);
      expect(done).toBe(false);
      await client.query('commit');
      expect((await write).status).toBeLessThan(300);
    } finally {
      client.release();
    }
  });

  it('400 on a malformed read; 400 on a broker without the KV', async () => {
    const s = await leasedBatch();
    const bad = await cycle(s, uniqueName('lk-sink'), [{ namespace: 'bad ns', key: 'k', version: 1 }]);
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('VALIDATION_FAILED');
    const bare = await startTestBroker();
    try {
      const src = uniqueName('lk-src');
      await bare.http('POST', '/api/v1/push', { items: [{ queue: src, partition: 'p', payload: 1 }] });
      const reg = await bare.http('POST', '/streams/v1/queries', { name: uniqueName('lk'), source_queue: src, config_hash: 'h' });
      const m = (await bare.http('GET', `/api/v1/pop/queue/${src}?batch=1&wait=false`)).body.messages[0];
      const res = await bare.http('POST', '/streams/v1/cycle', {
        query_id: reg.body.query_id,
        partition_id: m.partitionId,
        ack: { transactionId: m.transactionId, leaseId: m.leaseId },
        kv_reads: [{ namespace: 'ns', key: 'k', version: 0 }],
      });
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('VALIDATION_FAILED');
    } finally {
      await bare.stop();
    }
  });
});
