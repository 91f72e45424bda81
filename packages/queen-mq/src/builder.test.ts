import { describe, expect, it } from 'vitest';
import { Stream, type GateStage } from './index.js';

const src = { name: 'src' };
const sink = { name: 'sink' };
const gate = (fn: GateStage['evaluate']): GateStage => ({ kind: 'gate', evaluate: fn });

describe('chain validation at build time', () => {
  it('S1 structure rules throw from the offending call', () => {
    expect(() => Stream.from(src).reduce((a: number) => a, 0)).toThrow(/requires a preceding window/);
    expect(() => Stream.from(src).aggregate({ count: () => 1 })).toThrow(/requires a preceding window/);
    expect(() => Stream.from(src).windowTumbling({ seconds: 5 }).windowTumbling({ seconds: 5 })).toThrow(/only one window/);
    const agg = Stream.from(src).windowTumbling({ seconds: 5 }).aggregate({ count: () => 1 });
    expect(() => agg.reduce((a: number) => a, 0)).toThrow(/only one reduce/);
    expect(() => agg.aggregate({ sum: () => 1 })).toThrow(/only one reduce/);
    const ended = agg.to(sink);
    expect(() => ended.map((x) => x)).toThrow(/must be the last/);
    expect(() => ended.filter(() => true)).toThrow(/must be the last/);
    expect(() => ended.to(sink)).toThrow(/must be the last/);
    expect(() => ended.foreach(() => undefined)).toThrow(/must be the last/);
    expect(() => Stream.from(src).foreach(() => undefined).map((x) => x)).toThrow(/must be the last/);
    expect(() => Stream.from(src).windowTumbling({ seconds: 5 }).aggregate({})).toThrow(/at least one extractor/);
    expect(() => Stream.from(src).windowTumbling({ seconds: 5 }).aggregate({ s: 5 as any })).toThrow(/must be a function/);
  });

  it('S2 gate rules (core side: gate as a pipe stage)', () => {
    const g = gate(() => true);
    expect(() => Stream.from(src).pipe(g).pipe(g)).toThrow(/only one .gate\(\)/);
    expect(() => Stream.from(src).windowTumbling({ seconds: 5 }).aggregate({ count: () => 1 }).pipe(g)).toThrow(/incompatible/);
    expect(() => Stream.from(src).pipe(g).windowTumbling({ seconds: 5 })).toThrow(/incompatible/);
    expect(() => Stream.from(src).pipe(g).keyBy(() => 'k')).toThrow(/keyBy\(\) must come before/);
    expect(() => Stream.from(src).pipe({ kind: 'gate', evaluate: 5 } as any)).toThrow(/requires a function/);
    // keyBy before the gate is the legal order
    expect(() => Stream.from(src).keyBy(() => 'k').pipe(g).to(sink).compile()).not.toThrow();
  });

  it('S3 options: tumbling seconds and the core window options', () => {
    for (const seconds of [0, -1, '60', 1.5, Number.NaN]) {
      expect(() => Stream.from(src).windowTumbling({ seconds: seconds as any }), String(seconds)).toThrow(/seconds must be a positive integer/);
    }
    const w = (o: object) => () => Stream.from(src).windowTumbling({ seconds: 5, ...o });
    expect(w({ onLate: 'sideOutput' })).toThrow(/onLate must be "drop", "include" or a sink plugin/);
    expect(w({ idleFlushMs: -1 })).toThrow(/idleFlushMs must be a non-negative number/);
    expect(w({ gracePeriod: -1 })).toThrow(/gracePeriod must be a non-negative number/);
    expect(w({ allowedLateness: -0.5 })).toThrow(/allowedLateness must be a non-negative number/);
    expect(w({ eventTime: 'ts' })).toThrow(/eventTime must be a function/);
    expect(w({ idleFlushMs: 0, gracePeriod: 0, allowedLateness: 0, onLate: 'include' })).not.toThrow();
  });

  it('S4 whole-chain rule: a window needs a reducer; compile() and run() reject before any request', async () => {
    const chain = Stream.from(src).windowTumbling({ seconds: 5 }).to(sink);
    expect(() => chain.compile()).toThrow(/requires a downstream .reduce\(\) or .aggregate\(\)/);
    // Port 9 (discard) has no broker: a request would fail differently, and much later.
    await expect(chain.run({ queryId: 'q', url: 'http://127.0.0.1:9' })).rejects.toThrow(/requires a downstream .reduce\(\) or .aggregate\(\)/);
    expect(() => Stream.from(src).windowTumbling({ seconds: 5 }).map((x) => x).aggregate({ count: () => 1 }).compile()).toThrow(
      /requires a downstream .reduce\(\) or .aggregate\(\)/,
    );
  });

  it('S4 defaults: idleFlushMs 5000 for tumbling, grace 0, lateness 0, onLate drop', () => {
    const c = Stream.from(src).windowTumbling({ seconds: 5 }).aggregate({ count: () => 1 }).to(sink).compile();
    expect(c.window!.options).toMatchObject({ idleFlushMs: 5000, gracePeriodMs: 0, allowedLatenessMs: 0, onLate: 'drop' });
    expect(c.window!.options.eventTime).toBeUndefined();
  });

  it('S5 config hash covers the structure only', () => {
    const base = (o: { seconds?: number; idle?: number; grace?: number; et?: boolean; late?: number; onLate?: 'drop' | 'include'; sink?: string; fields?: Record<string, any> } = {}) =>
      Stream.from(src)
        .filter((m) => m.data.x > (o.idle ?? 0))
        .windowTumbling({
          seconds: o.seconds ?? 60,
          idleFlushMs: o.idle,
          gracePeriod: o.grace,
          allowedLateness: o.late,
          onLate: o.onLate,
          ...(o.et ? { eventTime: (m: any) => m.data.ts } : {}),
        })
        .aggregate(o.fields ?? { count: () => 1, sum: (m: any) => m.v })
        .to({ name: o.sink ?? 'sink' })
        .compile().configHash;
    const h = base();
    expect(h).toMatch(/^[0-9a-f]{64}$/);
    // closures, idleFlushMs, gracePeriod do not change it
    expect(base({ idle: 100, grace: 30 })).toBe(h);
    expect(base({ fields: { count: () => 2, sum: (m: any) => m.w } })).toBe(h);
    expect(base({ fields: { sum: (m: any) => m.w, count: () => 2 } })).toBe(h);
    // structure does
    const different = [
      base({ seconds: 30 }),
      base({ sink: 'other' }),
      base({ fields: { count: () => 1 } }),
      base({ fields: { count: () => 1, sum: () => 1, avg: () => 1 } }),
      base({ et: true }),
      base({ late: 10 }),
      base({ onLate: 'include' }),
    ];
    for (const d of different) expect(d).not.toBe(h);
    expect(new Set(different).size).toBe(different.length);
    // operator order
    const a = Stream.from(src).filter(() => true).map((x) => x).windowTumbling({ seconds: 5 }).aggregate({ count: () => 1 }).to(sink).compile().configHash;
    const b = Stream.from(src).map((x) => x).filter(() => true).windowTumbling({ seconds: 5 }).aggregate({ count: () => 1 }).to(sink).compile().configHash;
    expect(a).not.toBe(b);
  });

  it('builder is immutable: a derived chain never changes its parent', () => {
    const root = Stream.from(src).filter(() => true);
    const one = root.map((x) => x);
    const two = root.windowTumbling({ seconds: 1 }).aggregate({ count: () => 1 });
    expect(root.core.stages).toHaveLength(1);
    expect(one.core.stages).toHaveLength(2);
    expect(two.core.stages).toHaveLength(3);
    expect(Object.isFrozen(root)).toBe(true);
  });
});
