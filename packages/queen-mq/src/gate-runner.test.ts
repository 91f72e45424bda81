import { beforeAll, describe, expect, it } from 'vitest';
import { uniqueName, type TestBroker } from '@queen-mq/testing';
import { type Queen, Stream, tokenBucket } from './index.js';
import { collectUntil, configureSource, cursorOf, push, stateRows, useStreamBroker } from '../test/helpers.js';

// The `.gate()` sugar. The gate semantics themselves (S41–S47, the token-bucket
// acceptance run) are tested in packages/gate over `.pipe(gate(fn))`, which
// this sugar delegates to.

const env = useStreamBroker();
const { track } = env;
let b: TestBroker;
let queen: Queen;
beforeAll(() => {
  ({ b, queen } = env);
});

describe('.gate() sugar', () => {
  it('S2 gate rules through the sugar', () => {
    const q = queen.queue('s2');
    const f = () => true;
    expect(() => Stream.from(q).gate(f).gate(f)).toThrow(/only one .gate\(\)/);
    expect(() => Stream.from(q).windowTumbling({ seconds: 60 }).aggregate({ count: () => 1 }).gate(f)).toThrow(/incompatible/);
    expect(() => Stream.from(q).gate(f).windowTumbling({ seconds: 60 })).toThrow(/incompatible/);
    expect(() => Stream.from(q).gate(f).keyBy(() => 'k')).toThrow(/keyBy\(\) must come before/);
    expect(() => Stream.from(q).gate(5 as any)).toThrow(/requires a function/);
    expect(() => Stream.from(q).gate(tokenBucket({ capacity: 1, refillPerSecond: 1 })).to(queen.queue('s2-sink')).compile()).not.toThrow();
  });

  it('S42 the seed budget example, written with .gate()', async () => {
    const src = uniqueName('gs-src');
    const sink = uniqueName('gs-sink');
    const queryId = uniqueName('gs');
    await configureSource(b, src);
    const [p] = await push(b, src, Array.from({ length: 10 }, (_, i) => ({ n: i + 1 })));
    const h = await Stream.from(queen.queue(src))
      .gate((_req, ctx) => {
        ctx.state.remaining ??= 3;
        if (ctx.state.remaining < 1) return false;
        ctx.state.remaining -= 1;
        return true;
      })
      .to(queen.queue(sink))
      .run({ queryId, url: b.url, batchSize: 10, maxWaitMillis: 300 });
    track(h);
    const got = await collectUntil(b, sink, (all) => all.length >= 3, 8000, 600);
    expect(got.map((m) => m.data.n)).toEqual([1, 2, 3]);
    expect((await stateRows(b, h.queryUuid, p!.partition_id)).map((r) => r.value)).toEqual([{ remaining: 0 }]);
    expect(await cursorOf(b, `streams.${queryId}`, src)).toBe('3');
  });
});
