import { describe, expect, it } from 'vitest';
import { sliding } from './sliding.js';

// Deterministic pseudo-random timestamps (no flaky seeds): a small LCG.
function* randomTimes(n: number, seed = 42): Generator<number> {
  let x = seed;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) % 2147483648;
    // spread over ±40 years around 2026, millisecond resolution, negatives included
    yield Math.floor((x / 2147483648 - 0.5) * 2.5e12) + 1.77e12 * (i % 2);
  }
}

describe('sliding window plugin', () => {
  it('S3 slide at most size; both positive seconds to the millisecond', () => {
    expect(() => sliding({ size: 60, slide: 70 })).toThrow(/slide \(70\) must not exceed size \(60\)/);
    for (const bad of [{ size: 0, slide: 1 }, { size: 60, slide: 0 }, { size: -60, slide: 20 }, { size: '60', slide: 20 }, { size: 60, slide: 0.0005 }]) {
      expect(() => sliding(bad as any), JSON.stringify(bad)).toThrow(/positive number of seconds|whole number of milliseconds/);
    }
    expect(sliding({ size: 3600, slide: 60 })).toMatchObject({ kind: 'sliding', tag: 'slide:3600:60', shape: { size: 3600, slide: 60 }, defaultIdleFlushMs: 5000 });
    expect(sliding({ size: 90, slide: 60 })).toMatchObject({ tag: 'slide:90:60', shape: { size: 90, slide: 60 } });
    expect(sliding({ size: 1.5, slide: 0.4 })).toMatchObject({ tag: 'slide:1.5:0.4', shape: { size: 1.5, slide: 0.4 } });
  });

  it('S12 {size:90, slide:60}: starts on multiples of 60 s; 10:00:20 is in 09:59 and 10:00, 10:00:40 only in 10:00', () => {
    const w = sliding({ size: 90, slide: 60 });
    const t = (iso: string) => Date.parse(iso);
    const win = (s: string) => ({ start: t(`2026-01-05T${s}.000Z`), end: t(`2026-01-05T${s}.000Z`) + 90000 });
    expect(w.assign(t('2026-01-05T10:00:20.000Z'))).toEqual([win('09:59:00'), win('10:00:00')]);
    expect(w.assign(t('2026-01-05T10:00:29.999Z'))).toEqual([win('09:59:00'), win('10:00:00')]);
    // 09:59:00 + 90 s ends at 10:00:30, exclusive.
    expect(w.assign(t('2026-01-05T10:00:30.000Z'))).toEqual([win('10:00:00')]);
    expect(w.assign(t('2026-01-05T10:00:40.000Z'))).toEqual([win('10:00:00')]);
  });

  it('fractional seconds: {size:1.5, slide:0.4} starts every 400 ms from the epoch', () => {
    const w = sliding({ size: 1.5, slide: 0.4 });
    expect(w.assign(2000)).toEqual([{ start: 800, end: 2300 }, { start: 1200, end: 2700 }, { start: 1600, end: 3100 }, { start: 2000, end: 3500 }]);
    expect(w.assign(2299)).toEqual([{ start: 800, end: 2300 }, { start: 1200, end: 2700 }, { start: 1600, end: 3100 }, { start: 2000, end: 3500 }]);
    expect(w.assign(2300)).toEqual([{ start: 1200, end: 2700 }, { start: 1600, end: 3100 }, { start: 2000, end: 3500 }]);
  });

  it('S12 {size:60, slide:20}: 10:00:40.000 is in exactly the windows starting 10:00:00, 10:00:20, 10:00:40', () => {
    const w = sliding({ size: 60, slide: 20 });
    const t = (iso: string) => Date.parse(iso);
    expect(w.assign(t('2026-01-05T10:00:40.000Z'))).toEqual(
      ['10:00:00', '10:00:20', '10:00:40'].map((s) => ({ start: t(`2026-01-05T${s}.000Z`), end: t(`2026-01-05T${s}.000Z`) + 60000 })),
    );
  });

  it('assignment property: every event lands in exactly the windows [k·slide, k·slide+size) containing it', () => {
    for (const [size, slide] of [[60, 20], [4, 2], [3600, 60], [7, 7], [10, 1], [90, 60], [10, 3], [5, 4.5], [1.5, 0.4], [2, 0.75]] as const) {
      const w = sliding({ size, slide });
      for (const ts of randomTimes(300, size * 31 + slide)) {
        const got = w.assign(ts);
        // ceil(size / slide) windows, or one fewer where size is not a multiple of slide
        expect(got.length).toBeGreaterThanOrEqual(Math.floor(size / slide));
        expect(got.length).toBeLessThanOrEqual(Math.ceil(size / slide));
        // brute force: every slide-aligned start within one size before ts
        const expected = [];
        const slideMs = Math.round(slide * 1000);
        const first = Math.floor((ts - size * 1000) / slideMs) * slideMs;
        for (let s = first; s <= ts; s += slideMs) if (s <= ts && ts < s + size * 1000) expected.push({ start: s, end: s + size * 1000 });
        expect(got, `${size}/${slide} @ ${ts}`).toEqual(expected);
      }
    }
  });
});
