import { describe, expect, it } from 'vitest';
import { ClockCache } from './clock-cache.js';

/** Nanoseconds per `get` of one hot key in a cache holding `size` entries (best of 5 rounds). */
function hitCost(size: number): number {
  const cache = new ClockCache<string, number>(size);
  const keys = Array.from({ length: size }, (_, i) => `queue-${i % 5000}\u0000p-${i}`);
  for (const [i, k] of keys.entries()) cache.set(k, i);
  const hot = keys[size >> 1];
  let best = Infinity;
  for (let round = 0; round < 5; round++) {
    const n = 50_000;
    const t = process.hrtime.bigint();
    for (let i = 0; i < n; i++) if (cache.get(hot) === undefined) throw new Error('hot key lost');
    best = Math.min(best, Number(process.hrtime.bigint() - t) / n);
  }
  return best;
}

describe('ClockCache', () => {
  it('a hit costs the same whatever the cache holds (1,000 vs 100,000 entries)', () => {
    // The Map-reordering LRU it replaced paid more a hit the larger it grew
    // (a hot key's deleted copies piling up in its hash
    // chain); a ratio of 5 leaves room for a loaded machine.
    hitCost(1_000); // warm the JIT before measuring
    const small = hitCost(1_000);
    const large = hitCost(100_000);
    expect(large / small, `${small.toFixed(1)} ns vs ${large.toFixed(1)} ns a hit`).toBeLessThan(5);
  });

  it('evicts the entry the hand finds not hit since it last passed; a hit buys one more turn', () => {
    const c = new ClockCache<string, number>(3);
    c.set('a', 1).set('b', 2).set('c', 3);
    expect(c.get('a')).toBe(1);
    c.set('d', 4); // the hand clears a's bit, evicts b (never hit)
    expect([...c.entries()].map(([k]) => k).sort()).toEqual(['a', 'c', 'd']);
    c.set('e', 5); // c was never hit either
    expect(c.get('c')).toBeUndefined();
    c.set('f', 6); // a's hit was spent on the first pass: now a goes
    expect(c.get('a')).toBeUndefined();
    expect([...c.entries()].map(([k]) => k).sort()).toEqual(['d', 'e', 'f']);
    expect(c.size).toBe(3);
  });

  it('a hot key survives any number of one-off keys passing through', () => {
    const c = new ClockCache<string, number>(100);
    c.set('hot', 0);
    for (let i = 0; i < 10_000; i++) {
      expect(c.get('hot')).toBe(0);
      c.set(`once-${i}`, i);
      expect(c.size).toBeLessThanOrEqual(100);
    }
    expect(c.size).toBe(100);
  });

  it('set updates in place, delete frees a slot that the next key takes without evicting, clear empties it', () => {
    const c = new ClockCache<string, number>(2);
    c.set('a', 1).set('b', 2).set('a', 10);
    expect(c.get('a')).toBe(10);
    expect(c.size).toBe(2);
    expect(c.delete('b')).toBe(true);
    expect(c.delete('b')).toBe(false);
    c.set('c', 3);
    expect([...c.entries()]).toEqual([['a', 10], ['c', 3]]);
    c.clear();
    expect(c.size).toBe(0);
    c.set('x', 1).set('y', 2).set('z', 3);
    expect(c.size).toBe(2);
    expect(() => new ClockCache(0)).toThrow();
  });
});
