import { createHash } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { eventually, type TestBroker } from '@queen-mq/testing';
import { type Queen, Stream } from './index.js';
import { collectUntil, cursorOf, drain, push, sleep, stateRows, sumOf, useStreamBroker, SEP, runDefaults, windowRows } from '../test/helpers.js';

// Sliding, session and cron windows (and the event-time knobs on them) over real HTTP and PostgreSQL.

const env = useStreamBroker();
const { names, track } = env;
let b: TestBroker;
let queen: Queen;
beforeAll(() => {
  ({ b, queen } = env);
});

const ms = (iso: string) => Date.parse(iso);
const iso = (epochMs: number) => new Date(epochMs).toISOString();
const T = ms('2026-01-05T10:00:00.000Z');
const src0 = { name: 'x' };

/** Window bounds next to the aggregate, as ISO strings, so expectations read like the scenarios. */
const withBounds = (agg: object, ctx: { windowStart?: number; windowEnd?: number }) => ({ ...agg, start: iso(ctx.windowStart!), end: iso(ctx.windowEnd!) });

const waitCursor = (queryId: string, src: string, offset: string) => eventually(async () => (await cursorOf(b, `streams.${queryId}`, src)) === offset, 8000);

describe('builder', () => {
  it('S3 sliding, session and cron option errors (thrown by the builder call)', () => {
    expect(() => Stream.from(src0).windowSliding({ size: 60, slide: 70 })).toThrow(/slide \(70\) must not exceed size \(60\)/);
    expect(() => Stream.from(src0).windowSession({ gap: 0 })).toThrow(/gap must be a positive number/);
    expect(() => Stream.from(src0).windowCron({ every: 'fortnight' as any })).toThrow(/every must be one of/);
    expect(() => Stream.from(src0).windowSession({ gap: 5, onLate: 'sideOutput' as any })).toThrow(/onLate must be "drop", "include" or a sink plugin/);
    expect(() => Stream.from(src0).windowCron({ every: 'day', idleFlushMs: -1 })).toThrow(/idleFlushMs must be a non-negative number/);
    expect(() => Stream.from(src0).windowSliding({ size: 60, slide: 20, gracePeriod: -1 })).toThrow(/gracePeriod must be a non-negative number/);
    expect(() => Stream.from(src0).windowSession({ gap: 5, allowedLateness: -1 })).toThrow(/allowedLateness must be a non-negative number/);
  });

  it('S4 idle-flush defaults: 5000 sliding, 1000 session, 30000 cron; 0 allowed', () => {
    const opts = (s: Stream<any>) => s.aggregate({ count: () => 1 }).compile().window!.options;
    expect(opts(Stream.from(src0).windowSliding({ size: 60, slide: 20 }))).toMatchObject({ idleFlushMs: 5000, gracePeriodMs: 0, allowedLatenessMs: 0, onLate: 'drop' });
    expect(opts(Stream.from(src0).windowSession({ gap: 2 })).idleFlushMs).toBe(1000);
    expect(opts(Stream.from(src0).windowCron({ every: 'week' })).idleFlushMs).toBe(30000);
    expect(opts(Stream.from(src0).windowSession({ gap: 2, idleFlushMs: 0 })).idleFlushMs).toBe(0);
  });
});

describe('sliding', () => {
  it('S12 {size:60, slide:20}: one event at 10:00:40 makes exactly 3 rows', async () => {
    const { src, sink, queryId } = await names('s12a');
    const h = track(
      await Stream.from(queen.queue(src))
        .windowSliding({ size: 60, slide: 20, idleFlushMs: 0, eventTime: (m) => m.data.ts })
        .aggregate({ count: () => 1 })
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults }),
    );
    const [p] = await push(b, src, [{ ts: '2026-01-05T10:00:40.000Z' }]);
    await waitCursor(queryId, src, '1');
    const rows = (await stateRows(b, h.queryUuid, p!.partition_id)).filter((r) => r.key !== '__wm__');
    const starts = ['10:00:00', '10:00:20', '10:00:40'].map((s) => ms(`2026-01-05T${s}.000Z`));
    expect(rows.map((r) => r.key).sort()).toEqual(starts.map((s) => `slide:60:20${SEP}${iso(s)}${SEP}${p!.partition_id}`));
    for (const r of rows) expect(r.value).toEqual({ acc: { count: 1 }, windowStart: r.value.windowStart, windowEnd: r.value.windowStart + 60000 });
    expect(rows.some((r) => r.key.includes('09:59:40'))).toBe(false);
  });

  it('S12 {size:4, slide:2}: 6 events 1 s apart then one at 10:00:20 → counts sum to 12, every window 4000 ms', async () => {
    const { src, sink, queryId } = await names('s12b');
    track(
      await Stream.from(queen.queue(src))
        .windowSliding({ size: 4, slide: 2, idleFlushMs: 0, eventTime: (m) => m.data.ts })
        .aggregate({ count: () => 1 })
        .map(withBounds)
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults }),
    );
    await push(b, src, [0, 1, 2, 3, 4, 5].map((s) => ({ ts: iso(T + s * 1000) })));
    await push(b, src, [{ ts: '2026-01-05T10:00:20.000Z' }]);
    const got = await collectUntil(b, sink, (all) => sumOf(all, 'count') >= 12, 10000, 300);
    // windows start every 2 s from 09:59:58 to 10:00:04; 10:00:20's windows stay open
    expect(got.map((m) => [m.data.start.slice(11, 19), m.data.count])).toEqual([
      ['09:59:58', 2],
      ['10:00:00', 4],
      ['10:00:02', 4],
      ['10:00:04', 2],
    ]);
    expect(sumOf(got, 'count')).toBe(12);
    for (const m of got) expect(ms(m.data.end) - ms(m.data.start)).toBe(4000);
  });

  it('S12 {size:3, slide:2} (size not a multiple of slide): 6 events 1 s apart → windows every 2 s counting 1, 3, 3, 2', async () => {
    const { src, sink, queryId } = await names('s12c');
    track(
      await Stream.from(queen.queue(src))
        .windowSliding({ size: 3, slide: 2, idleFlushMs: 0, eventTime: (m) => m.data.ts })
        .aggregate({ count: () => 1 })
        .map(withBounds)
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults }),
    );
    await push(b, src, [0, 1, 2, 3, 4, 5].map((s) => ({ ts: iso(T + s * 1000) })));
    await push(b, src, [{ ts: '2026-01-05T10:00:20.000Z' }]);
    const got = await collectUntil(b, sink, (all) => sumOf(all, 'count') >= 9, 10000, 300);
    // starts on multiples of 2 s, ends exclusive: 10:00:01 is only in [10:00:00, 10:00:03), 10:00:02 in two windows
    expect(got.map((m) => [m.data.start.slice(11, 19), m.data.end.slice(11, 19), m.data.count])).toEqual([
      ['09:59:58', '10:00:01', 1],
      ['10:00:00', '10:00:03', 3],
      ['10:00:02', '10:00:05', 3],
      ['10:00:04', '10:00:07', 2],
    ]);
    expect(sumOf(got, 'count')).toBe(9);
  });

  it('S21 sliding event-time close: each window closes once the watermark reaches its end', async () => {
    const { src, sink, queryId } = await names('s21s');
    track(
      await Stream.from(queen.queue(src))
        .windowSliding({ size: 60, slide: 30, idleFlushMs: 0, eventTime: (m) => m.data.ts })
        .aggregate({ count: () => 1 })
        .map(withBounds)
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults }),
    );
    await push(b, src, [{ ts: '2026-01-05T10:00:10.000Z' }, { ts: '2026-01-05T10:00:50.000Z' }]);
    const first = await collectUntil(b, sink, (all) => all.length >= 1, 8000, 300);
    expect(first.map((m) => m.data)).toEqual([{ count: 1, start: '2026-01-05T09:59:30.000Z', end: '2026-01-05T10:00:30.000Z' }]);
    await push(b, src, [{ ts: '2026-01-05T10:01:00.000Z' }]);
    await waitCursor(queryId, src, '3');
    const all = await drain(b, sink);
    expect(all.map((m) => m.data)).toEqual([
      { count: 1, start: '2026-01-05T09:59:30.000Z', end: '2026-01-05T10:00:30.000Z' },
      { count: 2, start: '2026-01-05T10:00:00.000Z', end: '2026-01-05T10:01:00.000Z' },
    ]);
  });

  it('S25 sliding allowed lateness: an event 30 s behind the newest lands in both its windows', async () => {
    const { src, sink, queryId } = await names('s25s');
    const chain = () =>
      Stream.from(queen.queue(src))
        .windowSliding({ size: 60, slide: 30, idleFlushMs: 0, allowedLateness: 60, eventTime: (m) => m.data.ts })
        .aggregate({ count: () => 1, sum: (m) => m.v })
        .to(queen.queue(sink));
    const first = await chain().run({ queryId, url: b.url, ...runDefaults });
    const [p] = await push(b, src, [{ ts: '2026-01-05T11:00:00.000Z', v: 1 }]);
    await waitCursor(queryId, src, '1');
    await first.stop();
    const second = track(await chain().run({ queryId, url: b.url, ...runDefaults }));
    await push(b, src, [{ ts: '2026-01-05T10:59:30.000Z', v: 5 }]);
    await waitCursor(queryId, src, '2');
    expect(second.metrics().lateEventsTotal).toBe(0);
    const rows = await stateRows(b, second.queryUuid, p!.partition_id);
    const acc = (start: string) => rows.find((r) => r.key === `slide:60:30${SEP}2026-01-05T${start}.000Z${SEP}${p!.partition_id}`)?.value.acc;
    expect(acc('10:59:00')).toEqual({ count: 1, sum: 5 });
    expect(acc('10:59:30')).toEqual({ count: 2, sum: 6 });
    expect(acc('11:00:00')).toEqual({ count: 1, sum: 1 });
  });
});

describe('cron', () => {
  it('S13 minute buckets over the broker: 10:00:35.123 and 10:00:59.999 close together at 10:01:00', async () => {
    const { src, sink, queryId } = await names('s13');
    const h = track(
      await Stream.from(queen.queue(src))
        .windowCron({ every: 'minute', idleFlushMs: 0, eventTime: (m) => m.data.ts })
        .aggregate({ count: () => 1 })
        .map(withBounds)
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults }),
    );
    const [p] = await push(b, src, [{ ts: '2026-01-05T10:00:35.123Z' }, { ts: '2026-01-05T10:00:59.999Z' }, { ts: '2026-01-05T10:01:00.000Z' }]);
    const got = await collectUntil(b, sink, (all) => all.length >= 1, 8000, 300);
    expect(got.map((m) => m.data)).toEqual([{ count: 2, start: '2026-01-05T10:00:00.000Z', end: '2026-01-05T10:01:00.000Z' }]);
    const keys = (await stateRows(b, h.queryUuid, p!.partition_id)).map((r) => r.key).sort();
    expect(keys).toEqual(['__wm__', `cron:minute${SEP}2026-01-05T10:01:00.000Z${SEP}${p!.partition_id}`]);
  });

  it('S14 week buckets start Monday 00:00 UTC: Wed and Sun 23:59:59.999 together, Mon opens the next', async () => {
    const { src, sink, queryId } = await names('s14');
    const h = track(
      await Stream.from(queen.queue(src))
        .windowCron({ every: 'week', idleFlushMs: 0, eventTime: (m) => m.data.ts })
        .aggregate({ count: () => 1 })
        .map(withBounds)
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults }),
    );
    const [p] = await push(b, src, [{ ts: '2026-01-07T12:00:00.000Z' }, { ts: '2026-01-11T23:59:59.999Z' }, { ts: '2026-01-12T00:00:00.000Z' }]);
    const got = await collectUntil(b, sink, (all) => all.length >= 1, 8000, 300);
    expect(got.map((m) => m.data)).toEqual([{ count: 2, start: '2026-01-05T00:00:00.000Z', end: '2026-01-12T00:00:00.000Z' }]);
    const row = (await stateRows(b, h.queryUuid, p!.partition_id)).find((r) => r.key === `cron:week${SEP}2026-01-12T00:00:00.000Z${SEP}${p!.partition_id}`);
    expect(row?.value).toEqual({ acc: { count: 1 }, windowStart: ms('2026-01-12T00:00:00.000Z'), windowEnd: ms('2026-01-19T00:00:00.000Z') });
  });

  it('S21 cron event-time close with gracePeriod 10: 10:01:00 does not close [10:00,10:01), 10:01:10 does', async () => {
    const { src, sink, queryId } = await names('s21c');
    track(
      await Stream.from(queen.queue(src))
        .windowCron({ every: 'minute', idleFlushMs: 0, gracePeriod: 10, eventTime: (m) => m.data.ts })
        .aggregate({ count: () => 1 })
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults }),
    );
    await push(b, src, [{ ts: '2026-01-05T10:00:10.000Z' }, { ts: '2026-01-05T10:00:50.000Z' }]);
    await push(b, src, [{ ts: '2026-01-05T10:01:00.000Z' }]);
    await waitCursor(queryId, src, '3');
    await sleep(300);
    expect(await drain(b, sink)).toEqual([]);
    await push(b, src, [{ ts: '2026-01-05T10:01:10.000Z' }]);
    expect((await collectUntil(b, sink, (all) => all.length >= 1, 5000, 300)).map((m) => m.data)).toEqual([{ count: 2 }]);
  });
});

describe('session', () => {
  it('S15 session extension: t+2.000 extends (inclusive), t+4.001 starts the next; identity in the transactionId', async () => {
    const { src, sink, queryId } = await names('s15');
    const h = track(
      await Stream.from(queen.queue(src))
        .windowSession({ gap: 2, idleFlushMs: 0, eventTime: (m) => m.data.ts })
        .aggregate({ count: () => 1 })
        .map(withBounds)
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults }),
    );
    const [p] = await push(b, src, [{ ts: iso(T) }, { ts: iso(T + 2000) }, { ts: iso(T + 4001) }]);
    const pid = p!.partition_id;
    const [emit, ...more] = await collectUntil(b, sink, (all) => all.length >= 1, 8000, 300);
    expect(more).toEqual([]);
    expect(emit!.data).toEqual({ count: 2, start: iso(T), end: iso(T + 4000) });
    const identity = `sess:2${SEP}${iso(T)}${SEP}${pid}`;
    const tx = 'sx-' + createHash('sha256').update([h.queryUuid, pid, identity, '0'].join(SEP)).digest('hex').slice(0, 40);
    expect(emit!.transactionId).toBe(tx);
    const rows = await stateRows(b, h.queryUuid, pid);
    expect(rows.find((r) => r.key === `sess:2${SEP}open${SEP}${pid}`)?.value).toEqual({
      acc: { count: 1 },
      sessionStart: T + 4001,
      lastEventTime: T + 4001,
      windowEnd: T + 6001,
    });
    expect(rows).toHaveLength(2);
  });

  it('S16 out of order in one push: t, t+1.5 s, t+0.5 s (gap 2) → one open session of 3', async () => {
    const { src, sink, queryId } = await names('s16a');
    const h = track(
      await Stream.from(queen.queue(src))
        .windowSession({ gap: 2, idleFlushMs: 0, eventTime: (m) => m.data.ts })
        .aggregate({ count: () => 1 })
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults }),
    );
    const [p] = await push(b, src, [{ ts: iso(T) }, { ts: iso(T + 1500) }, { ts: iso(T + 500) }]);
    await waitCursor(queryId, src, '3');
    const rows = await stateRows(b, h.queryUuid, p!.partition_id);
    expect(rows.find((r) => r.key === `sess:2${SEP}open${SEP}${p!.partition_id}`)?.value).toEqual({
      acc: { count: 3 },
      sessionStart: T,
      lastEventTime: T + 1500,
      windowEnd: T + 3500,
    });
    expect(await drain(b, sink)).toEqual([]);
  });

  it('S16 processing time, keyBy user: alice and bob interleaved on one partition → one session each after the idle flush', async () => {
    const { src, sink, queryId } = await names('s16b');
    track(
      await Stream.from(queen.queue(src))
        .keyBy((m) => m.data.user)
        .windowSession({ gap: 1, idleFlushMs: 300 })
        .aggregate({ count: () => 1, sum: (m) => m.v })
        .map((agg, ctx) => ({ key: ctx.key, ...agg }))
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults }),
    );
    await push(b, src, [
      { user: 'alice', v: 1 },
      { user: 'bob', v: 10 },
      { user: 'alice', v: 2 },
      { user: 'bob', v: 20 },
      { user: 'alice', v: 3 },
      { user: 'bob', v: 30 },
    ]);
    const got = await collectUntil(b, sink, (all) => all.length >= 2, 8000, 500);
    expect(got.map((m) => m.data).sort((x, y) => x.key.localeCompare(y.key))).toEqual([
      { key: 'alice', count: 3, sum: 6 },
      { key: 'bob', count: 3, sum: 60 },
    ]);
  });

  it('S17 session idle flush with idleFlushMs omitted (1000): one emit within 4 s, the row is gone', async () => {
    const { src, sink, queryId } = await names('s17');
    const h = track(
      await Stream.from(queen.queue(src))
        .windowSession({ gap: 1 })
        .aggregate({ count: () => 1 })
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults }),
    );
    const t0 = Date.now();
    const [p] = await push(b, src, [{}, {}, {}]);
    const got = await collectUntil(b, sink, (all) => all.length >= 1, 4000, 300);
    expect(Date.now() - t0).toBeLessThan(4500);
    expect(got.map((m) => m.data)).toEqual([{ count: 3 }]);
    await eventually(async () => h.metrics().flushCyclesTotal >= 1, 2000);
    expect(await windowRows(b, h.queryUuid, p!.partition_id)).toEqual([]);
  });

  it('S17 the idle flush closes each new session of a quiet partition again (a commit wakes a partition it skipped)', async () => {
    const { src, sink, queryId } = await names('s17b');
    const h = track(
      await Stream.from(queen.queue(src))
        .windowSession({ gap: 0.5, idleFlushMs: 200 })
        .aggregate({ count: () => 1 })
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults }),
    );
    await push(b, src, [{}, {}]);
    expect((await collectUntil(b, sink, (all) => all.length >= 1, 4000)).map((m) => m.data)).toEqual([{ count: 2 }]);
    await sleep(500); // several ticks on a partition with nothing open
    const [p] = await push(b, src, [{}, {}, {}]);
    const all = await collectUntil(b, sink, (got) => got.length >= 2, 4000, 300);
    expect(all.map((m) => m.data)).toEqual([{ count: 2 }, { count: 3 }]);
    expect(await windowRows(b, h.queryUuid, p!.partition_id)).toEqual([]);
  });

  it('S18 for sessions: idleFlushMs 0 keeps a quiet session open until the next message of its partition', async () => {
    const { src, sink, queryId } = await names('s18s');
    const h = track(
      await Stream.from(queen.queue(src))
        .windowSession({ gap: 1, idleFlushMs: 0 })
        .aggregate({ count: () => 1 })
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults }),
    );
    await push(b, src, [{}, {}, {}]);
    await sleep(2200);
    expect(await drain(b, sink)).toEqual([]);
    const [p] = await push(b, src, [{}]);
    expect((await collectUntil(b, sink, (all) => all.length >= 1, 4000, 300)).map((m) => m.data)).toEqual([{ count: 3 }]);
    const rows = await windowRows(b, h.queryUuid, p!.partition_id);
    expect(rows.map((r) => r.value.acc)).toEqual([{ count: 1 }]);
    expect(h.metrics().flushCyclesTotal).toBe(0);
  });

  it('session merge: t, t+3 s, then t+1.5 s (gap 2) → ONE session of three, in one push and across batches with grace', async () => {
    for (const mode of ['one-push', 'three-pushes'] as const) {
      const { src, sink, queryId } = await names(`merge-${mode}`);
      track(
        await Stream.from(queen.queue(src))
          .windowSession({ gap: 2, idleFlushMs: 0, gracePeriod: mode === 'one-push' ? 0 : 2, eventTime: (m) => m.data.ts })
          .aggregate({ count: () => 1, sum: (m) => m.v })
          .map(withBounds)
          .to(queen.queue(sink))
          .run({ queryId, url: b.url, ...runDefaults }),
      );
      const events = [{ ts: iso(T), v: 1 }, { ts: iso(T + 3000), v: 10 }, { ts: iso(T + 1500), v: 100 }];
      if (mode === 'one-push') {
        await push(b, src, events);
      } else {
        for (const [i, e] of events.entries()) {
          await push(b, src, [e]);
          await waitCursor(queryId, src, String(i + 1));
        }
      }
      await push(b, src, [{ ts: iso(T + 10000), v: 0 }]);
      const got = await collectUntil(b, sink, (all) => all.length >= 1, 8000, 300);
      expect(got.map((m) => m.data), mode).toEqual([{ count: 3, sum: 111, start: iso(T), end: iso(T + 5000) }]);
    }
  });

  it('reduce after a session window merges with the user merge function', async () => {
    const { src, sink, queryId } = await names('sess-reduce');
    track(
      await Stream.from(queen.queue(src))
        .windowSession({ gap: 2, idleFlushMs: 0, eventTime: (m) => m.data.ts })
        .reduce((acc: string[], v) => [...acc, v.id], [] as string[], { merge: (a, b) => [...a, ...b].sort() })
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults }),
    );
    await push(b, src, [{ ts: iso(T), id: 'a' }, { ts: iso(T + 3000), id: 'c' }, { ts: iso(T + 1500), id: 'b' }, { ts: iso(T + 10000), id: 'z' }]);
    const got = await collectUntil(b, sink, (all) => all.length >= 1, 8000, 300);
    // a and c were merged by the user's function (sorted), then b was folded in by the reducer
    expect(got.map((m) => m.data)).toEqual([{ value: ['a', 'c', 'b'] }]);
  });

  it('S22 quiet event-time session and cron partitions keep their windows: the idle flush never advances the watermark', async () => {
    const make = async (kind: 'session' | 'cron') => {
      const { src, sink, queryId } = await names(`s22-${kind}`);
      const s = Stream.from(queen.queue(src));
      const w = kind === 'session'
        ? s.windowSession({ gap: 2, idleFlushMs: 200, eventTime: (m) => m.data.ts })
        : s.windowCron({ every: 'minute', idleFlushMs: 200, eventTime: (m) => m.data.ts });
      const h = track(await w.aggregate({ count: () => 1 }).to(queen.queue(sink)).run({ queryId, url: b.url, ...runDefaults }));
      const [p] = await push(b, src, [{ ts: '2026-01-05T10:00:10.000Z' }]);
      return { sink, h, p: p! };
    };
    const runs = await Promise.all([make('session'), make('cron')]);
    await sleep(3000);
    for (const { sink, h, p } of runs) {
      expect(await drain(b, sink)).toEqual([]);
      const keys = (await stateRows(b, h.queryUuid, p.partition_id)).map((r) => r.key).sort();
      expect(keys).toHaveLength(2);
      expect(keys[0]).toBe('__wm__');
    }
  });

  it('S24/S26 sessions: the late event is dropped (counted) — or re-emitted with the late session identity', async () => {
    for (const onLate of ['drop', 'include'] as const) {
      const { src, sink, queryId } = await names(`s24s-${onLate}`);
      const chain = () =>
        Stream.from(queen.queue(src))
          .windowSession({ gap: 2, idleFlushMs: 0, allowedLateness: 30, onLate, eventTime: (m) => m.data.ts })
          .aggregate({ count: () => 1, sum: (m) => m.v })
          .to(queen.queue(sink));
      const first = await chain().run({ queryId, url: b.url, ...runDefaults });
      const [p] = await push(b, src, [{ ts: '2026-01-05T11:00:00.000Z', v: 1 }]);
      await waitCursor(queryId, src, '1');
      const rows = await stateRows(b, first.queryUuid, p!.partition_id);
      expect(rows.find((r) => r.key === '__wm__')?.value).toEqual({ eventTimeMs: ms('2026-01-05T10:59:30.000Z') });
      await first.stop();
      const second = track(await chain().run({ queryId, url: b.url, ...runDefaults }));
      const [late] = await push(b, src, [{ ts: '2026-01-05T05:00:00.000Z', v: 999 }]);
      await waitCursor(queryId, src, '2');
      const after = await stateRows(b, second.queryUuid, p!.partition_id);
      expect(after.map((r) => r.value.acc).filter(Boolean), onLate).toEqual([{ count: 1, sum: 1 }]);
      if (onLate === 'drop') {
        expect(second.metrics().lateEventsTotal).toBe(1);
        await sleep(300);
        expect(await drain(b, sink)).toEqual([]);
      } else {
        expect(second.metrics().lateEventsTotal).toBe(0);
        const [emit] = await collectUntil(b, sink, (all) => all.length >= 1, 5000, 300);
        expect(emit!.data).toEqual({ count: 1, sum: 999 });
        const identity = `sess:2${SEP}2026-01-05T05:00:00.000Z${SEP}${p!.partition_id}${SEP}late${SEP}${late!.offset}`;
        const tx = 'sx-' + createHash('sha256').update([second.queryUuid, p!.partition_id, identity, '0'].join(SEP)).digest('hex').slice(0, 40);
        expect(emit!.transactionId).toBe(tx);
      }
    }
  });
});
