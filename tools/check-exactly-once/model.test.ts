import { describe, expect, it } from 'vitest';
import { cronBucket, fixedWindowsOf, referenceModel, type StoredMessage } from './model.js';
import type { Variant } from './variant.js';

// The reference model against windows computed by hand, so the checker's
// expectation is itself checked.

const base: Variant = { kind: 'tumbling', time: 'processing', graceS: 0, allowedLatenessS: 0, onLate: 'drop', idleFlushMs: 50, badEventTime: false, faults: [] };
let offset = 0;
const msg = (partition: string, data: StoredMessage['data'], createdAtMs = 0): StoredMessage => ({ partition, offset: String(++offset), createdAtMs, data });
const pick = (w: { partition: string; key: string; start: number; end: number; count: number; sum: number; open: boolean }) => [w.partition, w.key, w.start, w.end, w.count, w.sum, w.open];

describe('reference model', () => {
  it('window assignment: tumbling, sliding, cron units, a cron seconds list (wrapping the minute)', () => {
    expect(fixedWindowsOf(base, 1999)).toEqual([{ start: 1000, end: 2000 }]);
    expect(fixedWindowsOf(base, 2000)).toEqual([{ start: 2000, end: 3000 }]);
    expect(fixedWindowsOf({ ...base, kind: 'sliding', sliding: { sizeMs: 2000, slideMs: 1000 } }, 2500)).toEqual([
      { start: 1000, end: 3000 },
      { start: 2000, end: 4000 },
    ]);
    // size not a multiple of slide: 1500/1000 puts 2400 in two windows, 2600 in one
    const odd: Variant = { ...base, kind: 'sliding', sliding: { sizeMs: 1500, slideMs: 1000 } };
    expect(fixedWindowsOf(odd, 2400)).toEqual([{ start: 1000, end: 2500 }, { start: 2000, end: 3500 }]);
    expect(fixedWindowsOf(odd, 2500)).toEqual([{ start: 2000, end: 3500 }]);
    expect(fixedWindowsOf({ ...base, kind: 'sliding', sliding: { sizeMs: 1000, slideMs: 400 } }, 1000)).toEqual([
      { start: 400, end: 1400 },
      { start: 800, end: 1800 },
    ]);
    expect(fixedWindowsOf({ ...base, kind: 'cron-unit' }, 59_999)).toEqual([{ start: 59_000, end: 60_000 }]);
    const m = 120_000;
    expect(cronBucket([2, 5, 0], m + 3500)).toEqual({ start: m + 2000, end: m + 5000 });
    expect(cronBucket([0, 2, 5], m + 59_000)).toEqual({ start: m + 5000, end: m + 60_000 });
    expect(cronBucket([1, 5], m + 500)).toEqual({ start: m - 55_000, end: m + 1000 });
    expect(cronBucket([1, 5], m + 1000)).toEqual({ start: m + 1000, end: m + 5000 });
  });

  it('processing time: createdAt buckets, per partition and key, every window closed', () => {
    const r = referenceModel(base, [msg('p0', { k: 'a', n: 1 }, 1000), msg('p0', { k: 'a', n: 2 }, 1999), msg('p0', { k: 'b', n: 4 }, 1500), msg('p1', { k: 'a', n: 8 }, 2000)]);
    expect(r.windows.map(pick).sort()).toEqual(
      [
        ['p0', 'a', 1000, 2000, 2, 3, false],
        ['p0', 'b', 1000, 2000, 1, 4, false],
        ['p1', 'a', 2000, 3000, 1, 8, false],
      ].sort(),
    );
    expect(r.late).toEqual([]);
    expect(r.ambiguous).toEqual([]);
  });

  it('sessions: inclusive gap ends join, a longer silence splits', () => {
    const v: Variant = { ...base, kind: 'session' };
    // gap 300: 0, 200, 500 (= 200 + 300, joins), 801 (> 500 + 300, splits)
    const r = referenceModel(v, [msg('p0', { k: 'a', n: 1 }, 0), msg('p0', { k: 'a', n: 1 }, 200), msg('p0', { k: 'a', n: 1 }, 500), msg('p0', { k: 'a', n: 5 }, 801)]);
    expect(r.windows.map(pick)).toEqual([
      ['p0', 'a', 0, 800, 3, 3, false],
      ['p0', 'a', 801, 1101, 1, 5, false],
    ]);
  });

  it('event time: grace admits an out-of-order event, a late one after a seen watermark, the DLQ, open windows', () => {
    const v: Variant = { ...base, time: 'event', graceS: 1 };
    const r = referenceModel(v, [
      msg('p0', { k: 'a', n: 1, ts: 5500 }),
      // [4000, 5000): end + grace = 6000 > watermark ≤ 5500: folded in, although the watermark may be past its end
      msg('p0', { k: 'a', n: 2, ts: 4900 }),
      msg('p0', { k: 'a', n: 4 }), // no event time: DLQ
      // pushed after the watermark was seen at 5500: [1000, 2000) + 1 s grace ≤ 5500: late
      msg('p0', { k: 'b', n: 8, ts: 1200, wmSeen: 5500 }),
      msg('p0', { k: 'a', n: 16, ts: 9000 }), // final watermark 9000
    ]);
    expect(r.windows.map(pick).sort()).toEqual(
      [
        ['p0', 'a', 4000, 5000, 1, 2, false],
        ['p0', 'a', 5000, 6000, 1, 1, false],
        ['p0', 'a', 9000, 10000, 1, 16, true],
      ].sort(),
    );
    expect(r.late).toEqual([{ partition: 'p0', offset: expect.any(String), key: 'b', start: 1000, end: 2000, n: 8 }]);
    expect(r.deadLetters).toHaveLength(1);
    expect(r.ambiguous).toEqual([]);
  });

  it('event time: allowed lateness moves the watermark back; an event neither provably on time nor late is reported', () => {
    const v: Variant = { ...base, time: 'event', allowedLatenessS: 1 };
    const r = referenceModel(v, [msg('p0', { k: 'a', n: 1, ts: 6000 }), msg('p0', { k: 'a', n: 1, ts: 4100 }), msg('p0', { k: 'a', n: 1, ts: 3500 })]);
    // 4100: [4000, 5000), 5000 > 6000 − 1000? no, equal: could be late (watermark 5000) or not (an earlier batch cut): ambiguous
    // 3500: [3000, 4000) ends before any watermark 5000 could be, but no watermark was SEEN: ambiguous as well
    expect(r.ambiguous).toHaveLength(2);
    const fine = referenceModel(v, [msg('p0', { k: 'a', n: 1, ts: 6000 }), msg('p0', { k: 'a', n: 1, ts: 4100 + 1000 })]);
    expect(fine.ambiguous).toEqual([]);
  });

  it('sliding in event time: one late record per missed window, folded into the windows still open', () => {
    const v: Variant = { ...base, kind: 'sliding', time: 'event', sliding: { sizeMs: 2000, slideMs: 1000 } };
    const r = referenceModel(v, [msg('p0', { k: 'a', n: 1, ts: 3000 }), msg('p0', { k: 'a', n: 7, ts: 2500, wmSeen: 3000 }), msg('p0', { k: 'z', n: 0, ts: 99_000 })]);
    // 2500 is in [1000, 3000) (ended at the seen watermark 3000: late) and [2000, 4000) (open: folded)
    expect(r.late.map((l) => [l.start, l.end])).toEqual([[1000, 3000]]);
    expect(r.windows.filter((w) => w.key === 'a' && w.start === 2000).map(pick)).toEqual([['p0', 'a', 2000, 4000, 2, 8, false]]);
  });

  it('event-time sessions: late only on a key with no on-time event within the gap', () => {
    const v: Variant = { ...base, kind: 'session', time: 'event' };
    const r = referenceModel(v, [msg('p0', { k: 'a', n: 1, ts: 5000 }), msg('p0', { k: 'late', n: 2, ts: 1000, wmSeen: 5000 }), msg('p0', { k: 'a', n: 3, ts: 5300 }), msg('p0', { k: 'a', n: 9, ts: 60_000 })]);
    expect(r.late).toEqual([{ partition: 'p0', offset: expect.any(String), key: 'late', start: 1000, end: 1300, n: 2 }]);
    expect(r.windows.map(pick).sort()).toEqual(
      [
        ['p0', 'a', 5000, 5600, 2, 4, false],
        ['p0', 'a', 60_000, 60_300, 1, 9, true],
      ].sort(),
    );
  });

  it('gate: the first min(budget, n) messages of each partition, in offset order', () => {
    const v: Variant = { ...base, kind: 'gate', budget: 2 };
    const r = referenceModel(v, [msg('p0', { k: 'a', n: 1 }), msg('p0', { k: 'a', n: 2 }), msg('p0', { k: 'a', n: 3 }), msg('p1', { k: 'a', n: 4 })]);
    expect([...r.gate!].map(([p, list]) => [p, list.map((m) => m.n)])).toEqual([
      ['p0', [1, 2]],
      ['p1', [4]],
    ]);
  });
});
