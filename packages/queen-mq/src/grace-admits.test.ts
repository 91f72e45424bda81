import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBroker, testStream, uniqueName, type TestBroker } from '@queen-mq/testing';
import type { WindowPlugin } from '@queen-mq/core';
import { Stream } from './index.js';
import { drain } from '../test/helpers.js';

// gracePeriod is how long a window stays open after its end: in event time an
// out-of-order event for a window grace still holds open (its end + grace is
// after the watermark from before its batch) is folded into it, and only one
// for a window already emitted is late. The rule lives in core, so it holds
// for every window kind: tumbling, sliding, session (merging), cron and a
// custom plugin.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker({ virtualClock: '2026-01-05T10:00:00.000Z' });
});
afterAll(async () => b?.stop());

const T = Date.parse('2026-01-05T10:00:00.000Z');
const S = 1000;
const iso = (epochMs: number) => new Date(epochMs).toISOString();

const every90s: WindowPlugin = {
  kind: 'grace-every-90s',
  shape: { seconds: 90 },
  defaultIdleFlushMs: 0,
  assign: (ts) => {
    const start = Math.floor(ts / 90_000) * 90_000;
    return [{ start, end: start + 90_000 }];
  },
};

const eventTime = (m: any) => m.data.ts;
const GRACE = 30;

/** A one-minute window [10:00, 10:01) with 30 s of grace: the same timeline for tumbling and cron unit. */
const minuteTimeline = {
  first: T + 10 * S,
  ahead: T + 70 * S,
  inGrace: T + 20 * S,
  closing: T + 95 * S,
  late: T + 30 * S,
  emitted: [{ start: T, end: T + 60 * S, count: 2 }],
  missed: { start: T, end: T + 60 * S, latenessMs: 5 * S },
};

/**
 * Per kind, event times in order of pushing: `first` opens the window W;
 * `ahead` moves the watermark past W's end but not past its end + grace;
 * `inGrace` belongs to W (its own window, for a session) — folded, not late;
 * `closing` moves the watermark past W's end + grace: W emits with both;
 * `late` belongs to W again, now emitted: late, by `latenessMs`.
 */
const cases: {
  name: string;
  build: (s: Stream<any>, late: string) => Stream<any>;
  first: number;
  ahead: number;
  inGrace: number;
  closing: number;
  late: number;
  /** The windows `closing` emits, with their counts. */
  emitted: { start: number; end: number; count: number }[];
  /** The window the late event missed, and by how much. */
  missed: { start: number; end: number; latenessMs: number };
}[] = [
  {
    name: 'tumbling',
    build: (s, q) => s.windowTumbling({ seconds: 60, gracePeriod: GRACE, eventTime, onLate: { name: q } }),
    ...minuteTimeline,
  },
  {
    // [09:59, 10:01) and [10:00, 10:02): the in-grace event counts in both; the late one misses only the first.
    name: 'sliding',
    build: (s, q) => s.windowSliding({ size: 120, slide: 60, gracePeriod: GRACE, eventTime, onLate: { name: q } }),
    ...minuteTimeline,
    emitted: [{ start: T - 60 * S, end: T + 60 * S, count: 2 }],
    missed: { start: T - 60 * S, end: T + 60 * S, latenessMs: 5 * S },
  },
  {
    // Gap 10 s: the in-grace event's own session [10:00:12, 10:00:22] joins no open one; grace holds it open until 10:00:52.
    name: 'session',
    build: (s, q) => s.windowSession({ gap: 10, gracePeriod: GRACE, eventTime, onLate: { name: q } }),
    first: T,
    ahead: T + 25 * S,
    inGrace: T + 12 * S,
    closing: T + 60 * S,
    late: T + 11 * S,
    emitted: [
      { start: T, end: T + 10 * S, count: 1 },
      { start: T + 12 * S, end: T + 22 * S, count: 1 },
    ],
    missed: { start: T + 11 * S, end: T + 21 * S, latenessMs: 9 * S },
  },
  {
    name: 'cron unit',
    build: (s, q) => s.windowCron({ every: 'minute', gracePeriod: GRACE, eventTime, onLate: { name: q } }),
    ...minuteTimeline,
  },
  {
    name: 'cron expression',
    build: (s, q) => s.windowCron({ expression: '*/5 * * * *', timeZone: 'Europe/Berlin', gracePeriod: GRACE, eventTime, onLate: { name: q } }),
    first: T + 10 * S,
    ahead: T + 310 * S,
    inGrace: T + 20 * S,
    closing: T + 335 * S,
    late: T + 30 * S,
    emitted: [{ start: T, end: T + 300 * S, count: 2 }],
    missed: { start: T, end: T + 300 * S, latenessMs: 5 * S },
  },
  {
    name: 'a custom window plugin',
    build: (s, q) => s.window(every90s, { gracePeriod: GRACE, eventTime, onLate: { name: q } }),
    first: T + 10 * S,
    ahead: T + 100 * S,
    inGrace: T + 20 * S,
    closing: T + 125 * S,
    late: T + 30 * S,
    emitted: [{ start: T, end: T + 90 * S, count: 2 }],
    missed: { start: T, end: T + 90 * S, latenessMs: 5 * S },
  },
];

describe('gracePeriod admits (event time)', () => {
  for (const c of cases) {
    it(`${c.name}: an out-of-order event within grace is counted in its window; one after the window closed is late`, async () => {
      const src = uniqueName('grace-src');
      const late = uniqueName('grace-late');
      const t = await testStream(
        c
          .build(Stream.from({ name: src }), late)
          .aggregate({ count: () => 1 })
          .map((agg: any, ctx: any) => ({ ...agg, start: iso(ctx.windowStart), end: iso(ctx.windowEnd) }))
          .to({ name: `${src}.out` }),
        { broker: b },
      );
      try {
        expect(await t.push([{ ts: c.first }])).toEqual([]);
        expect(await t.push([{ ts: c.ahead }])).toEqual([]);
        // Past the window's end, within its grace: folded, nothing late.
        expect(await t.push([{ ts: c.inGrace }])).toEqual([]);
        expect(await drain(b, late, 'read')).toEqual([]);
        expect(t.metrics().lateEventsTotal).toBe(0);

        const closed = (await t.push([{ ts: c.closing }])).map((e) => e.data);
        expect(closed).toEqual(c.emitted.map((w) => ({ count: w.count, start: iso(w.start), end: iso(w.end) })));

        // Its window emitted: late.
        expect(await t.push([{ ts: c.late }])).toEqual([]);
        const records = (await drain(b, late, 'read')).map((r) => r.data);
        expect(records).toEqual([
          expect.objectContaining({ offset: '5', eventTimeMs: c.late, window: { start: c.missed.start, end: c.missed.end }, watermarkMs: c.closing, latenessMs: c.missed.latenessMs }),
        ]);
        expect(t.metrics().lateEventsTotal).toBe(1);
        expect(t.errors).toEqual([]);
      } finally {
        await t.stop();
      }
    });
  }

  it('allowedLateness and gracePeriod add up: late once max event time − allowedLateness − gracePeriod has passed the end', async () => {
    const src = uniqueName('grace-al');
    const t = await testStream(
      Stream.from<{ ts: number }>({ name: src })
        .windowTumbling({ seconds: 60, gracePeriod: 20, allowedLateness: 10, eventTime })
        .aggregate({ count: () => 1 })
        .to({ name: `${src}.out` }),
      { broker: b },
    );
    try {
      await t.push([{ ts: T + 10 * S }]);
      // Watermark 10:01:19 (10:01:29 − 10 s): [10:00, 10:01) is open until the watermark reaches 10:01:20.
      await t.push([{ ts: T + 89 * S }]);
      await t.push([{ ts: T + 20 * S }]);
      expect(t.metrics().lateEventsTotal).toBe(0);
      expect((await t.push([{ ts: T + 90 * S }])).map((e) => e.data)).toEqual([{ count: 2 }]);
      await t.push([{ ts: T + 30 * S }]);
      expect(t.metrics().lateEventsTotal).toBe(1);
    } finally {
      await t.stop();
    }
  });
});
