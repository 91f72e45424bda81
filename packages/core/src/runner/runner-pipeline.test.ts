import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { Stream } from '../stream.js';
import type { SinkPlugin } from '../plan/plugins.js';

// The pop loop pipelines: the next pop runs while earlier batches commit.
// Per partition that must still mean one batch at a time, in offset order,
// each exactly once (a partition is re-popped only after its lease is
// released by the committing cycle). Small batches over few partitions make
// many pops of the same partition follow each other closely.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => {
  await b?.stop();
});

function queueSink(queue: string): SinkPlugin {
  return { kind: 'queue', shape: { queue }, sinkQueue: queue, toPushItems: (v: unknown) => [{ queue, payload: v }] } as SinkPlugin;
}

describe('runner pipelining', () => {
  it('S50 pipelined pops: every partition processed in offset order, each message once, sink in source order', async () => {
    const src = uniqueName('pipe-src');
    const sink = uniqueName('pipe-sink');
    // A long lease: a redelivery (which would legitimately repeat offsets) must not happen in this test.
    expect((await b.http('POST', '/api/v1/configure', { queue: src, options: { leaseTime: 60 } })).status).toBe(200);
    const PARTITIONS = 3;
    const PER = 120;
    const items = [];
    for (let p = 0; p < PARTITIONS; p++) for (let n = 0; n < PER; n++) items.push({ queue: src, partition: `p${p}`, payload: { p, n } });
    expect((await b.http('POST', '/api/v1/push', { items })).status).toBe(201);

    const seen = new Map<string, string[]>();
    const errors: string[] = [];
    const lost: string[] = [];
    const handle = await Stream.from({ name: src })
      .map((m: any, ctx) => {
        const list = seen.get(ctx.partitionId) ?? [];
        list.push(ctx.offset!);
        seen.set(ctx.partitionId, list);
        return m.data;
      })
      .to(queueSink(sink))
      .run({ queryId: uniqueName('pipe'), url: b.url, batchSize: 7, maxPartitions: 1, maxWaitMillis: 100, onError: (e, i) => errors.push(`${i.phase}: ${e.message}`) });
    handle.on('lease:lost', (e: { code: string }) => lost.push(e.code));
    try {
      await eventually(() => expect(handle.metrics().messagesTotal).toBe(PARTITIONS * PER), 60000);
    } finally {
      await handle.stop();
    }
    expect(errors).toEqual([]);
    expect(lost).toEqual([]);
    expect(handle.metrics().cyclesTotal).toBeGreaterThanOrEqual((PARTITIONS * PER) / 7);
    // Processing order per partition: strictly increasing offsets, nothing twice.
    expect(seen.size).toBe(PARTITIONS);
    for (const offsets of seen.values()) {
      expect(offsets).toHaveLength(PER);
      for (let i = 1; i < offsets.length; i++) expect(BigInt(offsets[i]!) > BigInt(offsets[i - 1]!)).toBe(true);
    }
    // The sink holds each message once, in source order per partition.
    const res = await b.sql.query(
      `select p.name as partition, m.payload from queen.messages m join queen.partitions p on p.id = m.partition_id
        where p.queue_name = $1 order by p.name, m.msg_offset`,
      [sink],
    );
    for (let p = 0; p < PARTITIONS; p++) {
      const got = res.rows.filter((r) => r.partition === `p${p}`).map((r) => r.payload);
      expect(got).toEqual(Array.from({ length: PER }, (_, n) => ({ p, n })));
    }
  });
});
