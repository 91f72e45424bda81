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
  it('S3 size must be an integer multiple of slide; both positive integers', () => {
    expect(() => sliding({ size: 60, slide: 7 })).toThrow(/integer multiple/);
    for (const bad of [{ size: 0, slide: 1 }, { size: 60, slide: 0 }, { size: -60, slide: 20 }, { size: '60', slide: 20 }, { size: 60, slide: 2.5 }]) {
      expect(() => sliding(bad as any), JSON.stringify(bad)).toThrow(/positive integer/);
    }
    expect(sliding({ size: 3600, slide: 60 })).toMatchObject({ kind: 'sliding', tag: 'slide:3600:60', shape: { size: 3600, slide: 60 }, defaultIdleFlushMs: 5000 });
  });

  it('S12 {size:60, slide:20}: 10:00:40.000 is in exactly the windows starting 10:00:00, 10:00:20, 10:00:40', () => {
    const w = sliding({ size: 60, slide: 20 });
    const t = (iso: string) => Date.parse(iso);
    expect(w.assign(t('2026-01-05T10:00:40.000Z'))).toEqual(
      ['10:00:00', '10:00:20', '10:00:40'].map((s) => ({ start: t(`2026-01-05T${s}.000Z`), end: t(`2026-01-05T${s}.000Z`) + 60000 })),
    );
  });

  it('assignment property: every event lands in exactly the windows [k·slide, k·slide+size) containing it', () => {
    for (const [size, slide] of [[60, 20], [4, 2], [3600, 60], [7, 7], [10, 1]] as const) {
      const w = sliding({ size, slide });
      for (const ts of randomTimes(300, size * 31 + slide)) {
        const got = w.assign(ts);
        expect(got).toHaveLength(size / slide);
        // brute force: every slide-aligned start within one size before ts
        const expected = [];
        const first = Math.floor((ts - size * 1000) / (slide * 1000)) * slide * 1000;
        for (let s = first; s <= ts; s += slide * 1000) if (s <= ts && ts < s + size * 1000) expected.push({ start: s, end: s + size * 1000 });
        expect(got, `${size}/${slide} @ ${ts}`).toEqual(expected);
      }
    }
  });
});
