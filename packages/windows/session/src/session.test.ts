import { describe, expect, it } from 'vitest';
import { session } from './session.js';

describe('session window plugin', () => {
  it('S3 gap must be a positive number', () => {
    for (const gap of [0, -1, '2', NaN, Infinity, null, undefined]) {
      expect(() => session({ gap: gap as any }), String(gap)).toThrow(/gap must be a positive number/);
    }
    expect(session({ gap: 1800 })).toMatchObject({ kind: 'session', tag: 'sess:1800', shape: { gap: 1800 }, defaultIdleFlushMs: 1000 });
  });

  it('assign opens [t, t+gap]; merge joins touching (inclusive) and overlapping windows only', () => {
    const s = session({ gap: 2 });
    expect(s.assign(1000)).toEqual([{ start: 1000, end: 3000 }]);
    expect(s.merging).toBe('inclusive-ends-one-open-row-per-key');
    expect(s.merge([{ start: 0, end: 2000 }, { start: 2000, end: 4000 }])).toEqual([{ start: 0, end: 4000, merged: [0, 1] }]);
    expect(s.merge([{ start: 0, end: 2000 }, { start: 2001, end: 4001 }])).toEqual([
      { start: 0, end: 2000, merged: [0] },
      { start: 2001, end: 4001, merged: [1] },
    ]);
    // t, t+3 s, then t+1.5 s bridges both: the answer says which inputs it merged
    expect(s.merge([{ start: 0, end: 2000 }, { start: 3000, end: 5000 }, { start: 1500, end: 3500 }])).toEqual([{ start: 0, end: 5000, merged: [0, 2, 1] }]);
  });

  it('merge property: the result is disjoint, sorted, and covers exactly the union of the inputs', () => {
    const s = session({ gap: 1 });
    let x = 99;
    const rnd = () => (x = (x * 1103515245 + 12345) % 2147483648) / 2147483648;
    for (let round = 0; round < 300; round++) {
      const input = Array.from({ length: 1 + Math.floor(rnd() * 8) }, () => s.assign(Math.floor(rnd() * 10000))[0]!);
      const out = s.merge(input);
      for (let i = 1; i < out.length; i++) expect(out[i]!.start).toBeGreaterThan(out[i - 1]!.end);
      for (const w of input) expect(out.filter((m) => m.start <= w.start && w.end <= m.end)).toHaveLength(1);
      // every input is named by exactly one answer, and that answer contains it
      expect(out.flatMap((m) => m.merged).sort((a, b) => a - b)).toEqual(input.map((_, i) => i));
      for (const m of out) for (const i of m.merged) expect(m.start <= input[i]!.start && input[i]!.end <= m.end).toBe(true);
      for (const m of out) {
        expect(input.some((w) => w.start === m.start)).toBe(true);
        expect(input.some((w) => w.end === m.end)).toBe(true);
      }
    }
  });
});
