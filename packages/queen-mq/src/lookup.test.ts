import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kvBrokerFeature } from '@queen-mq/kv/broker';
import { eventually, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { Queen, Stream } from './index.js';
import { collectUntil, configureSource, runDefaults } from '../test/helpers.js';

// `.lookup()` end to end: a stream enriched from the KV while a writer keeps
// changing the entries it reads.

let b: TestBroker;
let queen: Queen;
beforeAll(async () => {
  b = await startTestBroker({ ...kvBrokerFeature() });
  queen = new Queen({ url: b.url });
});
afterAll(async () => {
  await queen?.close();
  await b?.stop();
});

describe('lookup (enrich)', () => {
  it("adds each value's entry; 'null' for a missing key, 'skip' drops, 'dlq' fails the message to the DLQ", async () => {
    const ns = uniqueName('customers').replace(/[^A-Za-z0-9._:-]/g, '');
    await queen.kv.set(ns, 'c1', { tier: 'gold' });
    const src = uniqueName('lk-src');
    await configureSource(b, src, { retryLimit: 0 });
    const sink = uniqueName('lk-sink');
    const skipSink = uniqueName('lk-skip');
    const dlqSink = uniqueName('lk-dlq');
    const items = [{ customer: 'c1', n: 1 }, { customer: 'nobody', n: 2 }, { customer: 'c1', n: 3 }].map((payload) => ({ queue: src, partition: 'p', payload }));
    expect((await b.http('POST', '/api/v1/push', { items })).status).toBe(201);
    const run = (chain: Stream<any>) => chain.run({ ...runDefaults, queryId: uniqueName('lk'), url: b.url });
    const handles = [
      await run(Stream.from(queen.queue(src)).lookup(ns, (m: any) => m.data.customer, { as: 'customer' }).to(queen.queue(sink))),
      await run(Stream.from(queen.queue(src)).lookup(ns, (m: any) => m.data.customer, { as: 'customer', missing: 'skip' }).to(queen.queue(skipSink))),
      await run(Stream.from(queen.queue(src)).lookup(ns, (m: any) => m.data.customer, { missing: 'dlq' }).to(queen.queue(dlqSink))),
    ];
    try {
      const got = await collectUntil(b, sink, (all) => all.length >= 3, 20_000, 500);
      expect(got.map((m) => m.data)).toEqual([
        { customer: { tier: 'gold' }, n: 1 },
        { customer: null, n: 2 },
        { customer: { tier: 'gold' }, n: 3 },
      ]);
      const skipped = await collectUntil(b, skipSink, (all) => all.length >= 2, 20_000, 500);
      expect(skipped.map((m) => m.data.n)).toEqual([1, 3]);
      const dlqd = await collectUntil(b, dlqSink, (all) => all.length >= 2, 20_000, 500);
      expect(dlqd.map((m) => m.data)).toEqual([{ customer: 'c1', n: 1, lookup: { tier: 'gold' } }, { customer: 'c1', n: 3, lookup: { tier: 'gold' } }]);
      const dlq = await eventually(async () => {
        const res = await b.http('GET', `/api/v1/dlq?queue=${src}&limit=10`);
        return res.body.messages.length === 1 ? res.body.messages : undefined;
      }, 20_000);
      expect(dlq[0].errorMessage).toMatch(/no KV entry .*\/nobody/);
    } finally {
      await Promise.all(handles.map((h) => h.stop()));
    }
  });

  it('under concurrent KV writes, every output carries a value that was committed, and outputs never go back to an older one', async () => {
    const ns = uniqueName('prices').replace(/[^A-Za-z0-9._:-]/g, '');
    await queen.kv.set(ns, 'price', { v: 0 });
    const src = uniqueName('lk-src');
    await configureSource(b, src);
    const sink = uniqueName('lk-sink');
    const N = 300;
    let writing = true;
    let written = 0;
    const writer = (async () => {
      while (writing) {
        await queen.kv.set(ns, 'price', { v: ++written });
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    const h = await Stream.from(queen.queue(src))
      .lookup(ns, () => 'price', { as: 'price' })
      .to(queen.queue(sink))
      .run({ ...runDefaults, batchSize: 5, queryId: uniqueName('lk'), url: b.url });
    try {
      for (let i = 0; i < N; i += 10) {
        await b.http('POST', '/api/v1/push', { items: Array.from({ length: 10 }, (_, j) => ({ queue: src, partition: 'p', payload: { i: i + j } })) });
      }
      const got = await collectUntil(b, sink, (all) => all.length >= N, 60_000, 1000);
      writing = false;
      await writer;
      expect(got.map((m) => m.data.i)).toEqual(Array.from({ length: N }, (_, i) => i));
      const seen = got.map((m) => m.data.price.v as number);
      for (const v of seen) expect(v).toBeLessThanOrEqual(written);
      for (let i = 1; i < seen.length; i++) expect(seen[i]!).toBeGreaterThanOrEqual(seen[i - 1]!);
      // The writer moved on while the stream ran: the outputs did not all read one value.
      expect(new Set(seen).size).toBeGreaterThan(1);
    } finally {
      writing = false;
      await h.stop();
    }
  });
});
