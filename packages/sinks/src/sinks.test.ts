import { describe, expect, it } from 'vitest';
import { foreachSink, queueSink } from './index.js';

const ctx = { partition: 'cust-7', partitionId: '0195f0a0-0000-7000-8000-000000000001', key: 'k' };

describe('sink plugins', () => {
  it('S29 queue sink partition: source partition by default, a fixed name, or a function of the value', () => {
    expect(queueSink({ name: 'out' }).toPushItems!({ region: 'eu' }, ctx)).toEqual([{ queue: 'out', partition: 'cust-7', payload: { region: 'eu' } }]);
    expect(queueSink('out', { partition: 'fixed' }).toPushItems!({}, ctx)[0]!.partition).toBe('fixed');
    expect(queueSink('out', { partition: (v: any) => v.region }).toPushItems!({ region: 'eu' }, ctx)[0]!.partition).toBe('eu');
    expect(() => queueSink('out', { partition: (v: any) => v.missing }).toPushItems!({}, ctx)).toThrow(/partition function returned undefined/);
    expect(queueSink('out')).toMatchObject({ kind: 'queue', shape: { queue: 'out' }, sinkQueue: 'out' });
  });

  it('a handle pinned to a partition (queue.partition(p)) is the sink partition', () => {
    expect(queueSink({ name: 'out', partitionName: 'p1' }).toPushItems!({ n: 1 }, ctx)).toEqual([{ queue: 'out', partition: 'p1', payload: { n: 1 } }]);
    expect(() => queueSink({ name: 'out', partitionName: 'p1' }, { partition: 'p2' })).toThrow(/pinned to a partition/);
    expect(() => queueSink({ name: 'out', partitionName: '' })).toThrow(/partition must be/);
  });

  it('rejects bad arguments at build time', () => {
    expect(() => queueSink('')).toThrow(/queue handle/);
    expect(() => queueSink('out', { partition: '' })).toThrow(/partition must be/);
    expect(() => foreachSink(5 as any)).toThrow(/requires a function/);
  });

  it('foreach runs the effect with the value and context', async () => {
    const seen: unknown[] = [];
    const sink = foreachSink((v, c) => {
      seen.push([v, c.partition]);
    });
    await sink.effect!({ n: 1 }, ctx);
    expect(seen).toEqual([[{ n: 1 }, 'cust-7']]);
    expect(sink.toPushItems).toBeUndefined();
  });
});
