import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleep, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { Stream } from '../stream.js';
import type { SinkPlugin } from '../plan/plugins.js';

// A worker's SIGTERM handler calls handle.stop(): popping stops at once (a
// parked long-poll is abandoned), the cycle in flight finishes and commits,
// and nothing runs after stop() resolved.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => {
  await b?.stop();
});

describe('runner stop', () => {
  it('handle.stop() during a cycle: the cycle commits (no redelivery, no error), the parked pop is abandoned, nothing runs afterwards', async () => {
    const src = uniqueName('stop-src');
    const queryId = uniqueName('stop');
    expect((await b.http('POST', '/api/v1/configure', { queue: src, options: { leaseTime: 60 } })).status).toBe(200);
    const items = Array.from({ length: 5 }, (_, n) => ({ queue: src, partition: 'p', payload: { n } }));
    expect((await b.http('POST', '/api/v1/push', { items })).status).toBe(201);

    // An effect sink that holds the cycle until the test lets it go.
    let entered!: () => void;
    const inCycle = new Promise<void>((r) => (entered = r));
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const effects: unknown[] = [];
    const slowSink: SinkPlugin = {
      kind: 'test-slow',
      shape: {},
      async effect(value) {
        effects.push(value);
        entered();
        await held;
      },
    };
    const errors: string[] = [];
    const commits: number[] = [];
    const handle = await Stream.from({ name: src })
      .map((m: any) => m.data)
      .to(slowSink)
      .run({ queryId, url: b.url, batchSize: 10, maxPartitions: 1, maxWaitMillis: 10000, onError: (e, i) => errors.push(`${i.phase}: ${e.message}`) });
    handle.on('cycle:commit', (c: { messages: number }) => commits.push(c.messages));

    await inCycle;
    let stopped = false;
    const stopping = handle.stop().then(() => (stopped = true));
    await sleep(300);
    expect(stopped).toBe(false); // waits for the cycle in flight
    const releasedAt = Date.now();
    release();
    await stopping;
    // The next pop was long-polling (up to 10 s) meanwhile: stop() abandoned it.
    expect(Date.now() - releasedAt).toBeLessThan(2000);

    expect(errors).toEqual([]);
    expect(commits).toEqual([5]);
    expect(effects).toHaveLength(5);
    // Committed: nothing is left for the query's consumer group.
    expect((await b.http('GET', `/api/v1/pop/queue/${src}?consumerGroup=streams.${queryId}&batch=10`)).status).toBe(204);

    // Stopped means stopped: a later message is not processed.
    expect((await b.http('POST', '/api/v1/push', { items: [{ queue: src, partition: 'p', payload: { n: 99 } }] })).status).toBe(201);
    await sleep(500);
    expect(effects).toHaveLength(5);
  });
});
