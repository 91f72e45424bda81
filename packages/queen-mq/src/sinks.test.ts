import { createHash } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { eventually, uniqueName, type TestBroker } from '@queen-mq/testing';
import { type Queen, Stream } from './index.js';
import { collectUntil, configureSource, cursorOf, push, sumOf, type SinkMessage, useStreamBroker, SEP, runDefaults } from '../test/helpers.js';

// Sinks, deterministic ids, stateless chains, resume and isolation over real HTTP and PostgreSQL.

const env = useStreamBroker();
const { names, track } = env;
let b: TestBroker;
let queen: Queen;
beforeAll(() => {
  ({ b, queen } = env);
});

describe('sink partition', () => {
  it('S29 default is the source partition name; a function or a fixed name overrides it', async () => {
    const d = await names('s29d');
    track(await Stream.from(queen.queue(d.src)).to(queen.queue(d.sink)).run({ queryId: d.queryId, url: b.url, ...runDefaults }));
    await push(b, d.src, [{ n: 1 }], 'cust-7');
    const dm = await collectUntil(b, d.sink, (all) => all.length >= 1, 8000);
    expect(dm.map((m) => [m.partition, m.data])).toEqual([['cust-7', { n: 1 }]]);

    const f = await names('s29f');
    track(
      await Stream.from(queen.queue(f.src))
        .map((m) => m.data)
        .to(queen.queue(f.sink), { partition: (v) => v.region })
        .run({ queryId: f.queryId, url: b.url, ...runDefaults }),
    );
    await push(b, f.src, [{ region: 'eu' }, { region: 'us' }], 'cust-7');
    const fm = await collectUntil(b, f.sink, (all) => all.length >= 2, 8000);
    expect(fm.map((m) => m.partition).sort()).toEqual(['eu', 'us']);

    const x = await names('s29x');
    track(await Stream.from(queen.queue(x.src)).to(queen.queue(x.sink), { partition: 'fixed' }).run({ queryId: x.queryId, url: b.url, ...runDefaults }));
    await push(b, x.src, [{ n: 1 }], 'cust-7');
    const xm = await collectUntil(b, x.sink, (all) => all.length >= 1, 8000);
    expect(xm.map((m) => m.partition)).toEqual(['fixed']);
  });
});

describe('foreach sink', () => {
  it('calls fn for every value (the payload), then acks', async () => {
    const { src, queryId } = await names('fe');
    const seen: unknown[] = [];
    const h = track(
      await Stream.from(queen.queue(src))
        .filter((m) => m.data.n !== 3)
        .foreach((v, ctx) => {
          seen.push([v, ctx.partition]);
        })
        .run({ queryId, url: b.url, ...runDefaults }),
    );
    await push(b, src, [1, 2, 3, 4, 5].map((n) => ({ n })));
    await eventually(async () => (await cursorOf(b, `streams.${queryId}`, src)) === '5', 8000);
    expect(seen).toEqual([1, 2, 4, 5].map((n) => [{ n }, 'Default']));
    expect(h.metrics().messagesTotal).toBe(5);
  });
});

describe('deterministic ids and stateless chains', () => {
  it('S31 a tumbling emit carries sx- + sha256(query_id␟pid␟window key␟0)', async () => {
    const { src, sink, queryId } = await names('s31w');
    const h = track(
      await Stream.from(queen.queue(src))
        .windowTumbling({ seconds: 60, idleFlushMs: 0, eventTime: (m) => m.data.ts })
        .aggregate({ count: () => 1 })
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults }),
    );
    const [p] = await push(b, src, [{ ts: '2026-01-05T10:00:10Z' }, { ts: '2026-01-05T10:01:10Z' }]);
    const pid = p!.partition_id;
    const [emit] = await collectUntil(b, sink, (all) => all.length >= 1, 8000);
    const expected = 'sx-' + createHash('sha256').update(`${h.queryUuid}${SEP}${pid}${SEP}tumb:60${SEP}2026-01-05T10:00:00.000Z${SEP}${pid}${SEP}0`).digest('hex').slice(0, 40);
    expect(emit!.transactionId).toBe(expected);
  });

  it('S31 filter + map: exactly the 20 non-heartbeats, marked, in source order; flatMap 5 × 4 → 20', async () => {
    const { src, sink, queryId } = await names('s31s');
    track(
      await Stream.from(queen.queue(src))
        .filter((m) => m.data.type !== 'heartbeat')
        .map((m) => ({ n: m.data.n, marked: true }))
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults, batchSize: 7 }),
    );
    const payloads = Array.from({ length: 30 }, (_, i) => (i % 3 === 2 ? { type: 'heartbeat', n: i } : { type: 'event', n: i }));
    await push(b, src, payloads);
    const all = await collectUntil(b, sink, (got) => got.length >= 20, 10000, 800);
    const expectedNs = payloads.filter((p) => p.type === 'event').map((p) => p.n);
    expect(all.map((m) => m.data)).toEqual(expectedNs.map((n) => ({ n, marked: true })));

    const fm = await names('s31f');
    track(
      await Stream.from(queen.queue(fm.src))
        .flatMap((m) => [0, 1, 2, 3].map((i) => ({ n: m.data.n, i })))
        .to(queen.queue(fm.sink))
        .run({ queryId: fm.queryId, url: b.url, ...runDefaults }),
    );
    await push(b, fm.src, [1, 2, 3, 4, 5].map((n) => ({ n })));
    const fall = await collectUntil(b, fm.sink, (got) => got.length >= 20, 10000, 800);
    expect(fall).toHaveLength(20);
    expect(new Set(fall.map((m) => m.transactionId)).size).toBe(20);
  });
});

describe('resume and isolation', () => {
  const chain = (src: string, sink: string) =>
    Stream.from(queen.queue(src))
      .windowTumbling({ seconds: 1, idleFlushMs: 300 })
      .aggregate({ count: () => 1, sum: (m) => m.n })
      .to(queen.queue(sink));

  it('S50 stop, push more, a new runner with the same queryId resumes: Σcount = 10', async () => {
    const { src, sink, queryId } = await names('s50r');
    const first = await chain(src, sink).run({ queryId, url: b.url, ...runDefaults });
    await push(b, src, [1, 2, 3, 4, 5].map((n) => ({ n })));
    const early = await collectUntil(b, sink, (all) => sumOf(all, 'count') >= 5, 8000);
    await first.stop();
    await push(b, src, [6, 7, 8, 9, 10].map((n) => ({ n })));
    track(await chain(src, sink).run({ queryId, url: b.url, ...runDefaults }));
    await eventually(async () => (await cursorOf(b, `streams.${queryId}`, src)) === '10', 8000);
    // the last window closes by idle flush; keep reading a while so a duplicate would show
    const all = await collectUntil(b, sink, (got) => sumOf(got, 'count') >= 10, 8000, 1000);
    expect(early.length).toBeGreaterThan(0);
    expect(sumOf(all, 'count')).toBe(10);
    expect(sumOf(all, 'sum')).toBe(55);
  });

  it('S50 two queries on one source each see everything through their own group', async () => {
    const src = uniqueName('s50i-src');
    await configureSource(b, src);
    const sinkA = uniqueName('s50i-a');
    const sinkB = uniqueName('s50i-b');
    track(await chain(src, sinkA).run({ queryId: uniqueName('s50a'), url: b.url, ...runDefaults }));
    track(await chain(src, sinkB).run({ queryId: uniqueName('s50b'), url: b.url, ...runDefaults }));
    await push(b, src, Array.from({ length: 12 }, (_, i) => ({ n: i + 1 })));
    const a = await collectUntil(b, sinkA, (all) => sumOf(all, 'count') >= 12, 10000);
    const c = await collectUntil(b, sinkB, (all) => sumOf(all, 'count') >= 12, 10000);
    expect([sumOf(a, 'count'), sumOf(a, 'sum')]).toEqual([12, 78]);
    expect([sumOf(c, 'count'), sumOf(c, 'sum')]).toEqual([12, 78]);
  });

  it('S50 20 partitions × 250 messages with maxPartitions 8: exact per-partition totals, no errors', async () => {
    const { src, sink, queryId } = await names('s50p');
    const errors: Error[] = [];
    const h = track(
      await chain(src, sink).run({ queryId, url: b.url, batchSize: 200, maxPartitions: 8, maxWaitMillis: 300, onError: (e) => errors.push(e) }),
    );
    const parts = Array.from({ length: 20 }, (_, i) => `p${i}`);
    for (const part of parts) {
      const items = [];
      for (let n = 1; n <= 250; n++) items.push({ queue: src, partition: part, payload: { n } });
      const res = await b.http('POST', '/api/v1/push', { items });
      expect(res.status).toBe(201);
    }
    const byPartition = (all: SinkMessage[]) => {
      const m = new Map<string, { count: number; sum: number }>();
      for (const msg of all) {
        const cur = m.get(msg.partition) ?? { count: 0, sum: 0 };
        cur.count += msg.data.count;
        cur.sum += msg.data.sum;
        m.set(msg.partition, cur);
      }
      return m;
    };
    const all = await collectUntil(b, sink, (got) => sumOf(got, 'count') >= 5000, 60000, 1500);
    const totals = byPartition(all);
    expect([...totals.keys()].sort()).toEqual([...parts].sort());
    for (const part of parts) expect(totals.get(part), part).toEqual({ count: 250, sum: 31375 });
    expect(h.metrics().errorsTotal).toBe(0);
    expect(errors).toEqual([]);
    expect(h.metrics().messagesTotal).toBe(5000);
  });
});

describe('register through the SDK', () => {
  it('S7 a changed chain under a registered name rejects mentioning reset; reset:true accepts it', async () => {
    const { src, sink, queryId } = await names('s7');
    const first = await Stream.from(queen.queue(src)).windowTumbling({ seconds: 60 }).aggregate({ count: () => 1 }).to(queen.queue(sink)).run({ queryId, url: b.url });
    await first.stop();
    const changed = Stream.from(queen.queue(src)).windowTumbling({ seconds: 30 }).aggregate({ count: () => 1 }).to(queen.queue(sink));
    await expect(changed.run({ queryId, url: b.url })).rejects.toThrow(/reset/);
    const again = await changed.run({ queryId, url: b.url, reset: true });
    expect(again.queryUuid).toBe(first.queryUuid);
    await again.stop();
  });
});
