import { beforeAll, describe, expect, it } from 'vitest';
import { type TestBroker } from '@queen-mq/testing';
import { type Queen, Stream } from './index.js';
import { createHash } from 'node:crypto';
import { eventually } from '@queen-mq/testing';
import { collectUntil, configureSource, cursorOf, drain, push, sleep, stateRows, sumOf, useStreamBroker, SEP, runDefaults, windowRows } from '../test/helpers.js';

// Window boundaries, closing knobs and aggregates over real HTTP and PostgreSQL.

const env = useStreamBroker();
const { names, track } = env;
let b: TestBroker;
let queen: Queen;
beforeAll(() => {
  ({ b, queen } = env);
});

describe('window boundaries (event time)', () => {
  it('S10 tumbling edges: 10:00:00.000 and 10:00:59.999 close together, 10:01:00.000 stays open', async () => {
    const { src, sink, queryId } = await names('s10');
    const h = track(
      await Stream.from(queen.queue(src))
        .windowTumbling({ seconds: 60, idleFlushMs: 0, eventTime: (m) => m.data.ts })
        .aggregate({ count: () => 1 })
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults }),
    );
    const [p] = await push(b, src, [{ ts: '2026-01-05T10:00:00.000Z' }, { ts: '2026-01-05T10:00:59.999Z' }, { ts: '2026-01-05T10:01:00.000Z' }]);
    const got = await collectUntil(b, sink, (all) => all.length >= 1, 10000);
    expect(got.map((m) => m.data)).toEqual([{ count: 2 }]);
    await sleep(300);
    expect(await drain(b, sink)).toHaveLength(1);
    const rows = await stateRows(b, h.queryUuid, p!.partition_id);
    const open = rows.find((r) => r.key === `tumb:60${SEP}2026-01-05T10:01:00.000Z${SEP}${p!.partition_id}`);
    expect(open?.value).toEqual({ acc: { count: 1 }, windowStart: Date.parse('2026-01-05T10:01:00.000Z'), windowEnd: Date.parse('2026-01-05T10:02:00.000Z') });
    expect(rows.find((r) => r.key === '__wm__')?.value).toEqual({ eventTimeMs: Date.parse('2026-01-05T10:01:00.000Z') });
    expect(rows).toHaveLength(2);
  });

  it('S11 epoch alignment: seconds 7 over epoch-ms 13000, 13999, 14000', async () => {
    const { src, sink, queryId } = await names('s11');
    const h = track(
      await Stream.from(queen.queue(src))
        .windowTumbling({ seconds: 7, idleFlushMs: 0, eventTime: (m) => m.data.t })
        .aggregate({ count: () => 1 })
        .map((agg, ctx) => ({ ...agg, start: ctx.windowStart, end: ctx.windowEnd }))
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults }),
    );
    const [p] = await push(b, src, [{ t: 13000 }, { t: 13999 }, { t: 14000 }]);
    const got = await collectUntil(b, sink, (all) => all.length >= 1, 10000);
    expect(got.map((m) => m.data)).toEqual([{ count: 2, start: 7000, end: 14000 }]);
    const rows = await stateRows(b, h.queryUuid, p!.partition_id);
    expect(rows.map((r) => r.key).sort()).toEqual(['__wm__', `tumb:7${SEP}1970-01-01T00:00:14.000Z${SEP}${p!.partition_id}`]);
  });
});

describe('event-time knobs', () => {
  it('S23 Date, epoch ms and ISO land in one window; unusable times are reported and dead-lettered, never acked away (issue 28 item 5)', async () => {
    const { src, sink, queryId } = await names('s23');
    await configureSource(b, src, { retryLimit: 0 });
    const errors: { phase: string; offset?: string }[] = [];
    const at = '2026-01-05T10:00:10.000Z';
    const h = track(
      await Stream.from(queen.queue(src))
        .windowTumbling({
          seconds: 60,
          idleFlushMs: 0,
          eventTime: (m) => (m.data.kind === 'date' ? new Date(m.data.t) : m.data.kind === 'ms' ? Date.parse(m.data.t) : m.data.t),
        })
        .aggregate({ count: () => 1 })
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults, onError: (_e, info) => errors.push(info) }),
    );
    await push(b, src, [
      { kind: 'date', t: at },
      { kind: 'ms', t: at },
      { kind: 'iso', t: at },
      { kind: 'iso', t: null },
      { kind: 'iso', t: 'not-a-date' },
      { kind: 'iso', t: '2026-01-05T10:01:00.000Z' },
    ]);
    const got = await collectUntil(b, sink, (all) => all.length >= 1, 8000, 300);
    expect(got.map((m) => m.data)).toEqual([{ count: 3 }]);
    expect(errors).toEqual([
      { phase: 'window-apply', partitionId: expect.any(String), offset: '4' },
      { phase: 'window-apply', partitionId: expect.any(String), offset: '5' },
    ]);
    await eventually(async () => (await cursorOf(b, `streams.${queryId}`, src)) === '6' || null, 8000);
    const dlq = (await b.http('GET', `/api/v1/dlq?queue=${src}`)).body.messages.sort((x: any, y: any) => Number(x.offset) - Number(y.offset));
    expect(dlq.map((m: any) => [m.offset, m.consumerGroup])).toEqual([['4', `streams.${queryId}`], ['5', `streams.${queryId}`]]);
    expect(dlq[1].errorMessage).toContain('eventTime returned "not-a-date" for the message at offset 5');
    expect(h.metrics()).toMatchObject({ messagesTotal: 4, messagesDeadLetteredTotal: 2 });
  });

  it('S21 event-time close: the window closes when the watermark reaches windowEnd (+ grace)', async () => {
    for (const grace of [0, 10]) {
      const { src, sink, queryId } = await names(`s21-${grace}`);
      track(
        await Stream.from(queen.queue(src))
          .windowTumbling({ seconds: 60, idleFlushMs: 0, gracePeriod: grace, eventTime: (m) => m.data.ts })
          .aggregate({ count: () => 1 })
          .to(queen.queue(sink))
          .run({ queryId, url: b.url, ...runDefaults }),
      );
      await push(b, src, [{ ts: '2026-01-05T10:00:10.000Z' }, { ts: '2026-01-05T10:00:50.000Z' }]);
      await eventually(async () => (await cursorOf(b, `streams.${queryId}`, src)) === '2', 8000);
      await push(b, src, [{ ts: '2026-01-05T10:01:00.000Z' }]);
      await eventually(async () => (await cursorOf(b, `streams.${queryId}`, src)) === '3', 8000);
      if (grace === 0) {
        expect((await collectUntil(b, sink, (all) => all.length >= 1, 5000, 300)).map((m) => m.data), 'grace 0').toEqual([{ count: 2 }]);
        continue;
      }
      await sleep(300);
      expect(await drain(b, sink), '10:01:00 does not close it with grace 10').toEqual([]);
      await push(b, src, [{ ts: '2026-01-05T10:01:10.000Z' }]);
      expect((await collectUntil(b, sink, (all) => all.length >= 1, 5000, 300)).map((m) => m.data), 'grace 10').toEqual([{ count: 2 }]);
    }
  });

  it('S22 a quiet event-time partition keeps its window: the idle flush never advances the watermark', async () => {
    const { src, sink, queryId } = await names('s22');
    const h = track(
      await Stream.from(queen.queue(src))
        .windowTumbling({ seconds: 60, idleFlushMs: 200, eventTime: (m) => m.data.ts })
        .aggregate({ count: () => 1 })
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults }),
    );
    const [p] = await push(b, src, [{ ts: '2026-01-05T10:00:10.000Z' }]);
    await sleep(3000);
    expect(await drain(b, sink)).toEqual([]);
    const keys = (await stateRows(b, h.queryUuid, p!.partition_id)).map((r) => r.key).sort();
    expect(keys).toEqual(['__wm__', `tumb:60${SEP}2026-01-05T10:00:00.000Z${SEP}${p!.partition_id}`]);
  });

  it('S25 allowed lateness keeps a window open for an event behind the newest one', async () => {
    const { src, sink, queryId } = await names('s25');
    const chain = () =>
      Stream.from(queen.queue(src))
        .windowTumbling({ seconds: 60, idleFlushMs: 0, allowedLateness: 60, eventTime: (m) => m.data.ts })
        .aggregate({ count: () => 1, sum: (m) => m.v })
        .to(queen.queue(sink));
    const first = await chain().run({ queryId, url: b.url, ...runDefaults });
    const [p] = await push(b, src, [{ ts: '2026-01-05T11:00:00.000Z', v: 1 }]);
    await eventually(async () => (await cursorOf(b, `streams.${queryId}`, src)) === '1', 8000);
    await first.stop();
    const second = track(await chain().run({ queryId, url: b.url, ...runDefaults }));
    await push(b, src, [{ ts: '2026-01-05T10:59:30.000Z', v: 5 }]);
    await eventually(async () => (await cursorOf(b, `streams.${queryId}`, src)) === '2', 8000);
    expect(second.metrics().lateEventsTotal).toBe(0);
    const row = (await stateRows(b, second.queryUuid, p!.partition_id)).find((r) => r.key === `tumb:60${SEP}2026-01-05T10:59:00.000Z${SEP}${p!.partition_id}`);
    expect(row?.value.acc).toEqual({ count: 1, sum: 5 });
  });

  it('S24/S26 watermark row, then a late event is dropped (counted) — or re-emitted with the late identity', async () => {
    for (const onLate of ['drop', 'include'] as const) {
      const { src, sink, queryId } = await names(`s24-${onLate}`);
      const chain = () =>
        Stream.from(queen.queue(src))
          .windowTumbling({ seconds: 60, idleFlushMs: 0, allowedLateness: 30, onLate, eventTime: (m) => m.data.ts })
          .aggregate({ count: () => 1, sum: (m) => m.v })
          .to(queen.queue(sink));
      const first = await chain().run({ queryId, url: b.url, ...runDefaults });
      const [p] = await push(b, src, [{ ts: '2026-01-05T11:00:00.000Z', v: 1 }]);
      await eventually(async () => (await cursorOf(b, `streams.${queryId}`, src)) === '1', 8000);
      const rows = await stateRows(b, first.queryUuid, p!.partition_id);
      expect(rows.find((r) => r.key === '__wm__')?.value).toEqual({ eventTimeMs: Date.parse('2026-01-05T10:59:30.000Z') });
      await first.stop();
      const second = track(await chain().run({ queryId, url: b.url, ...runDefaults }));
      const [late] = await push(b, src, [{ ts: '2026-01-05T05:00:00.000Z', v: 999 }]);
      await eventually(async () => (await cursorOf(b, `streams.${queryId}`, src)) === '2', 8000);
      const after = await stateRows(b, second.queryUuid, p!.partition_id);
      expect(after.some((r) => r.key.includes('05:00:00')), onLate).toBe(false);
      if (onLate === 'drop') {
        expect(second.metrics().lateEventsTotal).toBe(1);
        await sleep(300);
        expect(await drain(b, sink)).toEqual([]);
      } else {
        expect(second.metrics().lateEventsTotal).toBe(0);
        const [emit] = await collectUntil(b, sink, (all) => all.length >= 1, 5000, 300);
        expect(emit!.data).toEqual({ count: 1, sum: 999 });
        const identity = `tumb:60${SEP}2026-01-05T05:00:00.000Z${SEP}${p!.partition_id}${SEP}late${SEP}${late!.offset}`;
        const tx = 'sx-' + createHash('sha256').update([second.queryUuid, p!.partition_id, identity, '0'].join(SEP)).digest('hex').slice(0, 40);
        expect(emit!.transactionId).toBe(tx);
      }
    }
  });
});

describe('closing (processing time)', () => {
  it('S18 flush disabled: windows close only when the next message of the partition arrives', async () => {
    const { src, sink, queryId } = await names('s18');
    const h = track(
      await Stream.from(queen.queue(src))
        .windowTumbling({ seconds: 2, idleFlushMs: 0 })
        .aggregate({ count: () => 1 })
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults }),
    );
    await push(b, src, [{ v: 1 }, { v: 2 }]);
    await sleep(2600);
    expect(await drain(b, sink)).toEqual([]);
    expect(h.metrics().cyclesTotal).toBeGreaterThanOrEqual(1);
    const [p] = await push(b, src, [{ v: 3 }]);
    const got = await collectUntil(b, sink, (all) => sumOf(all, 'count') >= 2, 3000);
    expect(sumOf(got, 'count')).toBe(2);
    const rows = await windowRows(b, h.queryUuid, p!.partition_id);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.value.acc).toEqual({ count: 1 });
  });

  it('S19 idle flush closes a quiet partition and leaves no window rows', async () => {
    const { src, sink, queryId } = await names('s19');
    const h = track(
      await Stream.from(queen.queue(src))
        .windowTumbling({ seconds: 1, idleFlushMs: 700 })
        .aggregate({ count: () => 1, sum: (m) => m.v })
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults }),
    );
    const t0 = Date.now();
    const [p] = await push(b, src, [{ v: 7 }, { v: 7 }, { v: 7 }]);
    const got = await collectUntil(b, sink, (all) => sumOf(all, 'count') >= 3, 5000);
    expect(Date.now() - t0).toBeLessThan(5000);
    expect({ count: sumOf(got, 'count'), sum: sumOf(got, 'sum') }).toEqual({ count: 3, sum: 21 });
    // the runner counts the flush once the commit's answer is back, which may be just after the sink shows it
    await eventually(async () => h.metrics().flushCyclesTotal >= 1, 2000);
    // Only the close horizon stays: the window it closed ended at or before it.
    const rows = await stateRows(b, h.queryUuid, p!.partition_id);
    expect(rows.map((r) => r.key)).toEqual([`tumb:1${SEP}__closed__`]);
    expect(rows[0]!.value.closedThroughMs).toBeGreaterThan(t0 - 1000);
  });

  it('S19 with idleFlushMs omitted (5000) the emits arrive within 9 s', async () => {
    const { src, sink, queryId } = await names('s19d');
    const h = track(
      await Stream.from(queen.queue(src))
        .windowTumbling({ seconds: 1 })
        .aggregate({ count: () => 1, sum: (m) => m.v })
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults }),
    );
    const t0 = Date.now();
    await push(b, src, [{ v: 7 }, { v: 7 }, { v: 7 }]);
    const got = await collectUntil(b, sink, (all) => sumOf(all, 'count') >= 3, 9000);
    expect(Date.now() - t0).toBeLessThan(9000);
    expect({ count: sumOf(got, 'count'), sum: sumOf(got, 'sum') }).toEqual({ count: 3, sum: 21 });
    // the runner counts the flush once the commit's answer is back, which may be just after the sink shows it
    await eventually(async () => h.metrics().flushCyclesTotal >= 1, 2000);
  });

  it('S20 grace period holds the window open past its end', async () => {
    const { src, sink, queryId } = await names('s20');
    track(
      await Stream.from(queen.queue(src))
        .windowTumbling({ seconds: 2, gracePeriod: 4, idleFlushMs: 500 })
        .aggregate({ count: () => 1, sum: (m) => m.v })
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults }),
    );
    const t0 = Date.now();
    await push(b, src, [{ v: 1 }, { v: 2 }, { v: 3 }]);
    await sleep(Math.max(0, 3000 - (Date.now() - t0)));
    expect(await drain(b, sink)).toEqual([]);
    const got = await collectUntil(b, sink, (all) => sumOf(all, 'count') >= 3, 8000 - (Date.now() - t0));
    expect({ count: sumOf(got, 'count'), sum: sumOf(got, 'sum') }).toEqual({ count: 3, sum: 6 });
  });
});

describe('aggregates, reduce, post operators', () => {
  it('S27 aggregate payloads are exact', async () => {
    const { src, sink, queryId } = await names('s27');
    track(
      await Stream.from(queen.queue(src))
        .windowTumbling({ seconds: 60, idleFlushMs: 0, eventTime: (m) => m.data.ts })
        .aggregate({ count: () => 1, sum: (m) => m.x, min: (m) => m.x, max: (m) => m.x, avg: (m) => m.x })
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults }),
    );
    const at = (min: number, x: unknown) => ({ ts: `2026-01-05T10:0${min}:10.000Z`, x });
    await push(b, src, [10, 5, 30, 2, 3].map((x) => at(0, x)));
    await push(b, src, [4, 'x', null, 6].map((x) => at(1, x)));
    await push(b, src, [at(2, 1)]);
    const got = await collectUntil(b, sink, (all) => all.length >= 2, 10000);
    expect(got.map((m) => m.data)).toEqual([
      { count: 5, sum: 50, min: 2, max: 30, avg: 10 },
      { count: 4, sum: 10, min: 4, max: 6, avg: 5 },
    ]);
  });

  it('S28 reduce: scalar → {value}, object accumulators independent across windows', async () => {
    const a = await names('s28a');
    track(
      await Stream.from(queen.queue(a.src))
        .windowTumbling({ seconds: 60, idleFlushMs: 0, eventTime: (m) => m.data.ts })
        .reduce((acc: number, v) => acc + v.n, 0)
        .to(queen.queue(a.sink))
        .run({ queryId: a.queryId, url: b.url, ...runDefaults }),
    );
    await push(b, a.src, [{ ts: '2026-01-05T10:00:01Z', n: 4 }, { ts: '2026-01-05T10:00:02Z', n: 5 }, { ts: '2026-01-05T10:01:00Z', n: 100 }]);
    expect((await collectUntil(b, a.sink, (all) => all.length >= 1, 10000)).map((m) => m.data)).toEqual([{ value: 9 }]);

    const o = await names('s28b');
    track(
      await Stream.from(queen.queue(o.src))
        .windowTumbling({ seconds: 60, idleFlushMs: 0, eventTime: (m) => m.data.ts })
        .reduce((acc: { n: number }, v) => {
          acc.n += v.n;
          return acc;
        }, { n: 0 })
        .to(queen.queue(o.sink))
        .run({ queryId: o.queryId, url: b.url, ...runDefaults }),
    );
    // one batch spanning two windows, then a later event closing the second
    await push(b, o.src, [{ ts: '2026-01-05T10:00:01Z', n: 1 }, { ts: '2026-01-05T10:00:02Z', n: 2 }, { ts: '2026-01-05T10:01:01Z', n: 10 }]);
    await push(b, o.src, [{ ts: '2026-01-05T10:02:30Z', n: 1000 }]);
    expect((await collectUntil(b, o.sink, (all) => all.length >= 2, 10000)).map((m) => m.data)).toEqual([{ n: 3 }, { n: 10 }]);
  });

  it('S30 post map sees the window context; a post filter drops the emit but still deletes the row', async () => {
    const { src, sink, queryId } = await names('s30');
    const h = track(
      await Stream.from(queen.queue(src))
        .windowTumbling({ seconds: 60, idleFlushMs: 0, eventTime: (m) => m.data.ts })
        .aggregate({ count: () => 1 })
        .map((agg, ctx) => ({ ...agg, k: ctx.windowKey, p: ctx.partition, pid: ctx.partitionId, ws: ctx.windowStart, we: ctx.windowEnd, key: ctx.key }))
        .filter((v) => v.count !== 2)
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults }),
    );
    const [p] = await push(b, src, [{ ts: '2026-01-05T10:00:01Z' }, { ts: '2026-01-05T10:01:01Z' }, { ts: '2026-01-05T10:01:02Z' }], 'cust-7');
    await push(b, src, [{ ts: '2026-01-05T10:02:01Z' }, { ts: '2026-01-05T10:03:01Z' }], 'cust-7');
    const pid = p!.partition_id;
    const got = await collectUntil(b, sink, (all) => all.length >= 2, 10000, 500);
    expect(got.map((m) => m.data)).toEqual([
      { count: 1, k: `tumb:60${SEP}2026-01-05T10:00:00.000Z${SEP}${pid}`, p: 'cust-7', pid, ws: Date.parse('2026-01-05T10:00:00Z'), we: Date.parse('2026-01-05T10:01:00Z'), key: pid },
      { count: 1, k: `tumb:60${SEP}2026-01-05T10:02:00.000Z${SEP}${pid}`, p: 'cust-7', pid, ws: Date.parse('2026-01-05T10:02:00Z'), we: Date.parse('2026-01-05T10:03:00Z'), key: pid },
    ]);
    expect(typeof got[0]!.data.pid).toBe('string');
    // the 10:01 window (count 2) was filtered out: no sink message, and its row is gone
    const keys = (await stateRows(b, h.queryUuid, pid)).map((r) => r.key);
    expect(keys.sort()).toEqual(['__wm__', `tumb:60${SEP}2026-01-05T10:03:00.000Z${SEP}${pid}`]);
  });
});
