import { beforeAll, describe, expect, it } from 'vitest';
import { type TestBroker } from '@queen-mq/testing';
import { type Queen, Stream, type SourceMessage } from './index.js';
import { collectUntil, push, runDefaults, sleep, useStreamBroker } from '../test/helpers.js';

// A new query over retained history (issue 33): run({ from }) says where its
// group starts, run({ maxMessagesPerSecond }) paces the catch-up.

const env = useStreamBroker();
const { names, track } = env;
let b: TestBroker;
let queen: Queen;
beforeAll(() => {
  ({ b, queen } = env);
});

const copy = (src: string, sink: string) =>
  Stream.from<{ i: number }>(queen.queue(src))
    .map((m: SourceMessage<{ i: number }>) => m.data)
    .to(queen.queue(sink));

describe('replay from a point, paced', () => {
  it('a paced backfill of 300 retained messages stays within its rate ±10 %', async () => {
    const { src, sink, queryId } = await names('replay-paced');
    await push(b, src, Array.from({ length: 300 }, (_, i) => ({ i })));
    const commits: { at: number; messages: number }[] = [];
    const h = track(await copy(src, sink).run({ queryId, url: b.url, ...runDefaults, batchSize: 200, from: 'beginning', maxMessagesPerSecond: 100 }));
    h.on('cycle:commit', (e: { messages: number }) => commits.push({ at: performance.now(), messages: e.messages }));
    const got = await collectUntil(b, sink, (all) => all.length >= 300, 15000);
    expect(got.map((m) => m.data.i)).toEqual(Array.from({ length: 300 }, (_, i) => i));
    // The rate after the first pop: messages committed since, over the time since.
    const after = commits.slice(1).reduce((n, c) => n + c.messages, 0);
    const seconds = (commits.at(-1)!.at - commits[0]!.at) / 1000;
    const rate = after / seconds;
    expect(rate).toBeGreaterThan(90);
    expect(rate).toBeLessThan(110);
    expect(Math.max(...commits.map((c) => c.messages))).toBeLessThanOrEqual(20); // a fifth of a second's worth per pop
  });

  it("from: 'now' skips what the source held before the query's first pop", async () => {
    const { src, sink, queryId } = await names('replay-now');
    await push(b, src, [{ i: 1 }, { i: 2 }]);
    track(await copy(src, sink).run({ queryId, url: b.url, ...runDefaults, from: 'now' }));
    await sleep(500); // the group's first pop records where it starts
    await push(b, src, [{ i: 3 }]);
    const got = await collectUntil(b, sink, (all) => all.length >= 1, 10000, 500);
    expect(got.map((m) => m.data.i)).toEqual([3]);
  });

  it('from: an instant starts at the first message created at or after it', async () => {
    const { src, sink, queryId } = await names('replay-at');
    await push(b, src, [{ i: 1 }]);
    await sleep(50);
    const at = new Date();
    await sleep(50);
    await push(b, src, [{ i: 2 }, { i: 3 }]);
    track(await copy(src, sink).run({ queryId, url: b.url, ...runDefaults, from: at.toISOString() }));
    const got = await collectUntil(b, sink, (all) => all.length >= 2, 10000, 500);
    expect(got.map((m) => m.data.i)).toEqual([2, 3]);
  });
});
