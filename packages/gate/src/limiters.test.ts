import { describe, expect, it } from 'vitest';
import { Stream, type GateContext } from '@queen-mq/core';
import { tumbling } from '@queen-mq/window-tumbling';
import { gate, slidingWindowLimit, tokenBucket } from './index.js';

// Build-time rules (S2) and the rate limiter boundaries, with an injected
// clock and the runner's deny semantics: a denied evaluation's state
// mutation is thrown away, an allowed one is kept.

type GateFnUnderTest = (value: unknown, ctx: GateContext) => boolean | Promise<boolean>;

/** One key's state as the runner keeps it across evaluations. */
function keyState(fn: GateFnUnderTest) {
  let state: Record<string, any> = {};
  return async (streamTimeMs = Date.now()): Promise<boolean> => {
    const ctx: GateContext = { state: structuredClone(state), streamTimeMs, key: 'k', partition: 'Default', partitionId: 'k' };
    const allow = await fn({}, ctx);
    if (allow) state = ctx.state;
    return allow;
  };
}

async function admitted(attempt: () => Promise<boolean>, tries: number): Promise<number> {
  let n = 0;
  for (let i = 0; i < tries; i++) if (await attempt()) n += 1;
  return n;
}

describe('gate() stage and chain rules', () => {
  const src = { name: 'src' };
  const allow = () => true;

  it('S2 one gate, no window, keyBy before the gate, a function required', () => {
    expect(() => Stream.from(src).pipe(gate(allow)).pipe(gate(allow))).toThrow(/only one .gate\(\)/);
    expect(() => Stream.from(src).window(tumbling({ seconds: 60 })).aggregate({ count: () => 1 }).pipe(gate(allow))).toThrow(/incompatible/);
    expect(() => Stream.from(src).pipe(gate(allow)).window(tumbling({ seconds: 60 }))).toThrow(/incompatible/);
    expect(() => Stream.from(src).pipe(gate(allow)).keyBy(() => 'k')).toThrow(/keyBy\(\) must come before/);
    expect(() => gate(5 as any)).toThrow(/requires a function/);
    // keyBy before the gate is the allowed order
    expect(Stream.from(src).keyBy(() => 'k').pipe(gate(allow)).compile().shape).toBe('gate');
  });

  it('gate() hands value and ctx through and answers what fn answers (sync or async)', async () => {
    const seen: unknown[] = [];
    const g = gate((v: { n: number }, ctx) => {
      seen.push([v.n, ctx.key]);
      return v.n > 1 ? Promise.resolve({ allow: true }) : false;
    });
    const ctx: GateContext = { state: {}, streamTimeMs: 0, key: 'k1', partition: 'p', partitionId: 'pid' };
    expect(g.kind).toBe('gate');
    expect(await g.evaluate({ n: 1 }, ctx)).toBe(false);
    expect(await g.evaluate({ n: 2 }, ctx)).toEqual({ allow: true });
    expect(seen).toEqual([[1, 'k1'], [2, 'k1']]);
  });
});

describe('tokenBucket', () => {
  it('rejects bad options at build time', () => {
    expect(() => tokenBucket({ capacity: 0, refillPerSecond: 1 })).toThrow(/capacity/);
    expect(() => tokenBucket({ capacity: 1.5, refillPerSecond: 1 })).toThrow(/capacity/);
    expect(() => tokenBucket({ capacity: 1, refillPerSecond: -1 })).toThrow(/refillPerSecond/);
    expect(() => tokenBucket({ capacity: 1, refillPerSecond: 1, maxWaitMs: -1 })).toThrow(/maxWaitMs/);
  });

  it('admits exactly capacity at once, then exactly refillPerSecond per interval (injected clock)', async () => {
    let t = 1_000_000;
    const at = keyState(tokenBucket({ capacity: 10, refillPerSecond: 20, now: () => t, maxWaitMs: 0 }));
    expect(await admitted(at, 15)).toBe(10); // a new key starts full
    t += 49;
    expect(await admitted(at, 5)).toBe(0); // 0.98 token
    t += 1;
    expect(await admitted(at, 5)).toBe(1); // exactly one token at 50 ms
    // steady state: 2 per 100 ms, 20 per second, over ten intervals
    let total = 0;
    for (let i = 0; i < 10; i++) {
      t += 100;
      const n = await admitted(at, 5);
      expect(n).toBe(2);
      total += n;
    }
    expect(total).toBe(20);
    // a long pause refills to capacity, never beyond
    t += 60_000;
    expect(await admitted(at, 30)).toBe(10);
  });

  it('a deny consumes nothing and fractional refill rates stay exact', async () => {
    let t = 0;
    const at = keyState(tokenBucket({ capacity: 1, refillPerSecond: 0.5, now: () => t, maxWaitMs: 0 }));
    expect(await at()).toBe(true);
    for (const step of [500, 1000, 1999]) {
      t = step;
      expect(await at(), `t=${step}`).toBe(false);
    }
    t = 2000;
    expect(await at()).toBe(true);
    expect(await at()).toBe(false);
  });

  it('waits for a token due within maxWaitMs and books it at the instant it is due', async () => {
    const t = 5_000;
    const fn = tokenBucket({ capacity: 1, refillPerSecond: 20, now: () => t, maxWaitMs: 100 });
    const ctx: GateContext = { state: {}, streamTimeMs: 0, key: 'k', partition: 'p', partitionId: 'k' };
    expect(await fn({}, ctx)).toBe(true);
    const started = Date.now();
    const second = fn({}, ctx);
    expect(second).toBeInstanceOf(Promise);
    expect(await second).toBe(true);
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);
    expect(ctx.state.tokenBucket).toEqual({ milliTokens: 0, refilledAt: 5_050 });
    // a token further away than maxWaitMs is a deny, at once
    const slow = tokenBucket({ capacity: 1, refillPerSecond: 1, now: () => t, maxWaitMs: 100 });
    const c2: GateContext = { state: {}, streamTimeMs: 0, key: 'k', partition: 'p', partitionId: 'k' };
    expect(await slow({}, c2)).toBe(true);
    expect(slow({}, c2)).toBe(false);
  });

  it('I28.4 by default defers by lease: a token due in 50 ms is a deny, answered at once (no wait)', () => {
    const fn = tokenBucket({ capacity: 1, refillPerSecond: 20, now: () => 5_000 });
    const ctx: GateContext = { state: {}, streamTimeMs: 0, key: 'k', partition: 'p', partitionId: 'k' };
    expect(fn({}, ctx)).toBe(true);
    expect(fn({}, ctx)).toBe(false);
  });

  it('defaults to ctx.streamTimeMs as its clock', async () => {
    const at = keyState(tokenBucket({ capacity: 2, refillPerSecond: 1, maxWaitMs: 0 }));
    expect(await at(10_000)).toBe(true);
    expect(await at(10_000)).toBe(true);
    expect(await at(10_999)).toBe(false);
    expect(await at(11_000)).toBe(true);
  });
});

describe('slidingWindowLimit', () => {
  it('rejects bad options at build time', () => {
    expect(() => slidingWindowLimit({ limit: 0, windowSeconds: 1 })).toThrow(/limit/);
    expect(() => slidingWindowLimit({ limit: 2, windowSeconds: 0 })).toThrow(/windowSeconds/);
  });

  it('admits at most limit in any window, and a slot frees exactly windowSeconds after its admission', async () => {
    let t = 0;
    const at = keyState(slidingWindowLimit({ limit: 3, windowSeconds: 1, now: () => t, maxWaitMs: 0 }));
    const decisions: [number, boolean][] = [];
    for (const step of [0, 100, 200, 300, 999, 1000, 1050, 1099, 1100, 1200, 1999, 2000]) {
      t = step;
      decisions.push([step, await at()]);
    }
    expect(decisions).toEqual([
      [0, true], [100, true], [200, true], [300, false], [999, false],
      [1000, true], [1050, false], [1099, false], [1100, true], [1200, true], [1999, false], [2000, true],
    ]);
  });

  it('never exceeds the limit over an irregular arrival pattern, and admits whenever a slot is free', async () => {
    let t = 0;
    const limit = 4;
    const at = keyState(slidingWindowLimit({ limit, windowSeconds: 0.5, now: () => t, maxWaitMs: 0 }));
    const admittedAt: number[] = [];
    let seed = 7;
    for (let i = 0; i < 400; i++) {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      t += seed % 60;
      const inWindow = admittedAt.filter((a) => a > t - 500).length;
      const allow = await at();
      expect(allow, `t=${t}`).toBe(inWindow < limit);
      if (allow) admittedAt.push(t);
    }
    // both outcomes occurred many times (the pattern exercises the boundary)
    expect(admittedAt.length).toBeGreaterThan(50);
    expect(admittedAt.length).toBeLessThan(350);
  });

  it('I28.4 by default defers by lease: a slot freeing in 60 ms is a deny, answered at once (no wait)', () => {
    const fn = slidingWindowLimit({ limit: 1, windowSeconds: 0.06, now: () => 1_000 });
    const ctx: GateContext = { state: {}, streamTimeMs: 0, key: 'k', partition: 'p', partitionId: 'k' };
    expect(fn({}, ctx)).toBe(true);
    expect(fn({}, ctx)).toBe(false);
    expect(ctx.state.slidingWindow).toEqual([1_000]);
  });

  it('waits for the oldest slot when it frees within maxWaitMs', async () => {
    const t = 1_000;
    const fn = slidingWindowLimit({ limit: 1, windowSeconds: 0.06, now: () => t, maxWaitMs: 100 });
    const ctx: GateContext = { state: {}, streamTimeMs: 0, key: 'k', partition: 'p', partitionId: 'k' };
    expect(await fn({}, ctx)).toBe(true);
    expect(await fn({}, ctx)).toBe(true);
    expect(ctx.state.slidingWindow).toEqual([1_060]);
  });
});
