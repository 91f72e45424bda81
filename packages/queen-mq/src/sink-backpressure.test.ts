import { beforeAll, describe, expect, it } from 'vitest';
import { eventually, sleep, type TestBroker } from '@queen-mq/testing';
import { type Queen, Stream } from './index.js';
import { cursorOf, push, runDefaults, useStreamBroker } from '../test/helpers.js';

// A sink queue with a maxSize is backpressure for the stream that writes it:
// a cycle that does not fit commits nothing (state, sink pushes and the
// source ack wait together), the runner waits and tries again, the source's
// lag grows, and the stream resumes by itself once a consumer drains the
// sink. Over real HTTP and PostgreSQL, with a real runner.

const env = useStreamBroker();
const { names, track } = env;
let b: TestBroker;
let queen: Queen;
beforeAll(() => {
  ({ b, queen } = env);
});

const stored = async (queue: string) =>
  Number((await b.sql.query('select count(*) from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1', [queue])).rows[0].count);

describe('a bounded sink', () => {
  it('holds at most maxSize while the source keeps receiving; draining it lets every message through exactly once', async () => {
    const { src, sink, queryId } = await names('bp');
    expect((await b.http('POST', '/api/v1/configure', { queue: sink, options: { maxSize: 4 } })).status).toBe(200);
    const full: number[] = [];
    const h = track(
      await Stream.from(queen.queue(src))
        .map((m) => ({ n: m.data.n }))
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults, batchSize: 3 }),
    );
    h.on('sink:full', (e) => full.push(e.pending));
    await push(b, src, Array.from({ length: 6 }, (_, n) => ({ n })));
    await eventually(async () => full.length > 0, 10000);
    // The source keeps receiving while the sink is full.
    await push(b, src, Array.from({ length: 6 }, (_, n) => ({ n: n + 6 })));
    await sleep(1500);
    expect(await stored(sink)).toBeLessThanOrEqual(4);
    const acked = Number((await cursorOf(b, `streams.${queryId}`, src)) ?? 0);
    expect(acked).toBeLessThan(12);
    expect(h.metrics().sinkFullTotal).toBeGreaterThan(0);
    expect(h.metrics().errorsTotal).toBe(0);
    // A consumer drains the sink a few at a time: the stream resumes on its own.
    const got: number[] = [];
    await eventually(
      async () => {
        const r = await b.http('GET', `/api/v1/pop/queue/${sink}?batch=3&autoAck=true`);
        if (r.status === 200) got.push(...r.body.messages.map((m: any) => m.data.n));
        return got.length >= 12;
      },
      30000,
      100,
    );
    await sleep(1000);
    const rest = await b.http('GET', `/api/v1/pop/queue/${sink}?batch=100&autoAck=true`);
    if (rest.status === 200) got.push(...rest.body.messages.map((m: any) => m.data.n));
    // Each source message reached the sink once: nothing dropped, nothing twice.
    expect(got.sort((x, y) => x - y)).toEqual(Array.from({ length: 12 }, (_, n) => n));
    expect(await stored(sink)).toBe(12);
    await eventually(async () => (await cursorOf(b, `streams.${queryId}`, src)) === '12', 5000);
    expect(h.metrics().messagesTotal).toBe(12);
  });
});
