import { describe, expect, it } from 'vitest';
import { Stream } from '../stream.js';
import type { SinkPlugin } from '../plan/plugins.js';

// A join in a chain: its stage as plan() and the registration see it, and
// what its state hash (keep / migrate / blocked on a redeploy) depends on.

const sink: SinkPlugin = { kind: 'queue', shape: { queue: 'out' }, sinkQueue: 'out', toPushItems: (v) => [{ queue: 'out', payload: v }] };
const chain = (options: Record<string, unknown> = {}, name?: string) =>
  Stream.from({ name: 'orders' })
    .join({ name: 'payments' }, { within: { minutes: 5 }, key: (v: any) => v.id, ...options }, name ? { name } : undefined)
    .map((pair) => pair)
    .to(sink)
    .compile();

describe('join in a chain', () => {
  it('is a named, stateful stage (default name "join", kind join:<type>) before the operators that follow it', () => {
    const c = chain({ type: 'left' });
    expect(c.shape).toBe('join');
    expect(c.stages.map((s) => [s.name, s.kind, s.stateful, s.feeds_state])).toEqual([
      ['join', 'join:left', true, false],
      ['map-1', 'map', false, false],
      ['sink', 'sink:queue', false, false],
    ]);
    expect(chain({}, 'orders-with-payments').stages[0]!.name).toBe('orders-with-payments');
  });

  it("the state hash keeps across another bound, grace, key function or select; not across another type, right queue or clock", () => {
    const hashOf = (c: ReturnType<typeof chain>) => c.stages[0]!.state_hash;
    const base = chain();
    expect(hashOf(chain({ within: { minutes: 10 }, gracePeriod: 3, key: (v: any) => v.other, select: (l: any) => l }))).toBe(hashOf(base));
    expect(chain({ within: { minutes: 10 } }).configHash).toBe(base.configHash);
    expect(hashOf(chain({ type: 'left' }))).not.toBe(hashOf(base));
    expect(hashOf(chain({ eventTime: (v: any) => v.t }))).not.toBe(hashOf(base));
    const otherRight = Stream.from({ name: 'orders' }).join({ name: 'refunds' }, { within: { minutes: 5 }, key: (v: any) => v.id }).to(sink).compile();
    expect(hashOf(otherRight)).not.toBe(hashOf(base));
    // The code hash follows the functions.
    expect(chain({ key: (v: any) => v.other }).stages[0]!.code_hash).not.toBe(base.stages[0]!.code_hash);
  });

  it('refuses what it cannot run, at the call', () => {
    const from = Stream.from({ name: 'orders' });
    expect(() => from.join({ name: 'orders' }, { within: { seconds: 1 }, key: () => 1 })).toThrow(/must not be the source queue/);
    expect(() => from.join({ name: 'p' }, { key: () => 1 } as any)).toThrow(/within/);
    expect(() => from.join({ name: 'p' }, { within: { seconds: 1, ms: 2 } as any, key: () => 1 })).toThrow(/within/);
    expect(() => from.join({ name: 'p' }, { within: { seconds: 1 }, key: () => 1, type: 'outer' as any })).toThrow(/type/);
    const joined = from.join({ name: 'p' }, { within: { seconds: 1 }, key: () => 1 });
    expect(() => joined.join({ name: 'q' }, { within: { seconds: 1 }, key: () => 1 })).toThrow(/only one .join\(\)/);
    expect(() => joined.keyBy(() => 1)).toThrow(/cannot follow .join\(\)/);
    expect(() => joined.lookup('ns', () => 'k')).toThrow(/without a window, gate or join/);
  });
});
