import { beforeAll, describe, expect, it } from 'vitest';
import { eventually, type TestBroker } from '@queen-mq/testing';
import { type Queen, Stream } from './index.js';
import { collectUntil, cursorOf, push, runDefaults, sleep, useStreamBroker } from '../test/helpers.js';

// A stream over `queen.queue(q).partition(p)` reads only partition p of q;
// a sink handle pinned the same way writes only there.

const env = useStreamBroker();
const { names, track } = env;
let b: TestBroker;
let queen: Queen;
beforeAll(() => {
  ({ b, queen } = env);
});

describe('partition source', () => {
  it('compiles to the pinned partition; the config hash is the chain only', () => {
    const whole = Stream.from(queen.queue('q')).map((m) => m.data).to(queen.queue('s')).compile();
    const pinned = Stream.from(queen.queue('q').partition('a')).map((m) => m.data).to(queen.queue('s')).compile();
    expect(whole.sourcePartition).toBeNull();
    expect(pinned.sourceQueue).toBe('q');
    expect(pinned.sourcePartition).toBe('a');
    expect(pinned.configHash).toBe(whole.configHash);
    expect(() => Stream.from({ name: 'q', partitionName: '' })).toThrow(/partition/);
  });

  it('pops only partition a: the sink gets exactly the a messages, b is never consumed by the group', async () => {
    const { src, sink, queryId } = await names('psrc');
    const group = `streams.${queryId}`;
    // Both partitions hold messages before the stream starts, so a wildcard pop could claim either.
    await push(b, src, [1, 2, 3, 4, 5].map((n) => ({ p: 'b', n })), 'b');
    await push(b, src, [1, 2, 3].map((n) => ({ p: 'a', n })), 'a');

    const h = track(
      await Stream.from(queen.queue(src).partition('a'))
        .map((m) => ({ ...m.data, seen: true }))
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults }),
    );
    // Pushed while running too: the runner keeps reading a, and still not b.
    await push(b, src, [6, 7].map((n) => ({ p: 'b', n })), 'b');
    await push(b, src, [4].map((n) => ({ p: 'a', n })), 'a');

    await eventually(async () => (await cursorOf(b, group, src, 'a')) === '4', 10000);
    // Settle: several more pop rounds in which a stream reading b would show itself.
    const out = await collectUntil(b, sink, (all) => all.length >= 4, 10000, 1500);
    expect(out.map((m) => m.data)).toEqual([1, 2, 3, 4].map((n) => ({ p: 'a', n, seen: true })));
    expect(out.every((m) => m.partition === 'a')).toBe(true);
    expect(h.metrics().messagesTotal).toBe(4);

    // The stream's group has no cursor on b (or one at 0), and all of b is still there for it.
    const cursorB = await cursorOf(b, group, src, 'b');
    expect(cursorB === undefined || cursorB === '0').toBe(true);
    await h.stop();
    await sleep(50);
    const res = await b.http('GET', `/api/v1/pop/queue/${encodeURIComponent(src)}/partition/b?batch=100&consumerGroup=${encodeURIComponent(group)}&autoAck=true`);
    expect(res.status).toBe(200);
    expect(res.body.messages.map((m: any) => m.data)).toEqual([1, 2, 3, 4, 5, 6, 7].map((n) => ({ p: 'b', n })));
  });

  it('a window on a pinned partition closes by idle flush; b stays unconsumed', async () => {
    const { src, sink, queryId } = await names('psrcw');
    const group = `streams.${queryId}`;
    await push(b, src, [1, 2, 3].map((n) => ({ p: 'b', n })), 'b');
    await push(b, src, [1, 2, 3].map((n) => ({ p: 'a', n })), 'a');
    const h = track(
      await Stream.from(queen.queue(src).partition('a'))
        .windowTumbling({ seconds: 1, idleFlushMs: 200 })
        .aggregate({ count: () => 1, sum: (m) => m.n })
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults }),
    );
    // Nothing more arrives on a: only the idle flush can close its window(s).
    const out = await collectUntil(b, sink, (all) => all.reduce((s, m) => s + m.data.count, 0) >= 3, 10000, 1000);
    expect(out.every((m) => m.partition === 'a')).toBe(true);
    expect(out.reduce((s, m) => s + m.data.count, 0)).toBe(3);
    expect(out.reduce((s, m) => s + m.data.sum, 0)).toBe(6);
    expect(h.metrics().flushCyclesTotal).toBeGreaterThan(0);
    const cursorB = await cursorOf(b, group, src, 'b');
    expect(cursorB === undefined || cursorB === '0').toBe(true);
  });

  it('a sink handle pinned to a partition receives every output there, whatever the source partition', async () => {
    const { src, sink, queryId } = await names('psink');
    await push(b, src, [1, 2].map((n) => ({ n })), 'a');
    await push(b, src, [3].map((n) => ({ n })), 'b');
    track(
      await Stream.from(queen.queue(src))
        .map((m) => m.data)
        .to(queen.queue(sink).partition('all'))
        .run({ queryId, url: b.url, ...runDefaults }),
    );
    const out = await collectUntil(b, sink, (all) => all.length >= 3, 10000, 500);
    expect(out.every((m) => m.partition === 'all')).toBe(true);
    expect(out.map((m) => m.data.n).sort()).toEqual([1, 2, 3]);
  });
});
