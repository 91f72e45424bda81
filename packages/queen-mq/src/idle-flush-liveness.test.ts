import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, sleep, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { Queen, Stream } from './index.js';
import { collectUntil, configureSource, cursorOf, push, useStreamBroker, windowRows } from '../test/helpers.js';

// Issue 13 item 7: the idle flush must keep a partition while it holds open
// windows. It used to forget a partition quiet for 5 minutes (and seed a
// restarted runner only with partitions active in the last 5), so a window
// longer than that on a quiet partition was never emitted; and a partition
// whose cycle answer was lost stayed "awaiting redelivery" for good.

const env = useStreamBroker();
const { names, track } = env;
let b: TestBroker;
let queen: Queen;
let proxy: Server | undefined;
/**
 * A broker whose database clock the test moves (it stamps createdAt and is
 * the clock windows close on; the runner's clock seam reads it too): minutes
 * pass for the broker and the runner alike, without waiting for them. Moving
 * only the runner's clock no longer closes a window, as the broker's flush
 * guard refuses a window end ahead of its own clock (issue 28).
 */
let vb: TestBroker;
let vqueen: Queen;
beforeAll(async () => {
  ({ b, queen } = env);
  vb = await startTestBroker({ virtualClock: Date.now() });
  vqueen = new Queen({ url: vb.url });
});
afterAll(async () => {
  // The runner behind it may still hold keep-alive connections.
  proxy?.closeAllConnections();
  await new Promise((r) => (proxy ? proxy.close(r) : r(undefined)));
  await Promise.all(virtualHandles.map((h) => h.stop()));
  await vqueen?.close();
  await vb?.stop();
});

const MINUTE = 60_000;
const virtualHandles: { stop(): Promise<void> }[] = [];

/** A configured source, a sink and a query name on the virtual-clock broker. */
async function virtualNames(prefix: string) {
  const src = uniqueName(`${prefix}-src`);
  await configureSource(vb, src);
  return { src, sink: uniqueName(`${prefix}-sink`), queryId: uniqueName(prefix) };
}

/** The runner's clock seam on the virtual clock. */
const virtualNow = () => vb.clock!.now();

/** Moves the database's clock forward a minute at a time, letting the flush tick between steps. */
async function advance(minutes: number) {
  for (let i = 0; i < minutes; i++) {
    await vb.clock!.advance(MINUTE);
    await sleep(150);
  }
}

/**
 * A proxy in front of the broker that forwards everything, but for the first
 * cycle it waits for the broker's answer (the cycle committed) and then cuts
 * the connection: the runner never learns that it committed.
 */
async function answerLosingProxy(target: string): Promise<{ url: string; cut: () => number }> {
  let cutCycles = 0;
  const upstream = new URL(target);
  proxy = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const out = request(
        { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
        (up) => {
          const body: Buffer[] = [];
          up.on('data', (c) => body.push(c));
          up.on('end', () => {
            if (req.url === '/streams/v1/cycle' && cutCycles === 0) {
              cutCycles += 1;
              res.socket?.destroy();
              return;
            }
            res.writeHead(up.statusCode ?? 502, up.headers);
            res.end(Buffer.concat(body));
          });
        },
      );
      out.end(Buffer.concat(chunks));
    });
  });
  await new Promise<void>((r) => proxy!.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`, cut: () => cutCycles };
}

describe('idle flush liveness', () => {
  it('I13.7 a 10-minute window on a partition quiet for longer than 5 minutes is emitted once, exact count (virtual clock)', async () => {
    const { src, sink, queryId } = await virtualNames('flush-long');
    const h = await Stream.from(vqueen.queue(src))
      .windowTumbling({ seconds: 600, idleFlushMs: 100 })
      .aggregate({ count: () => 1 })
      .to(vqueen.queue(sink))
      .run({ queryId, url: vb.url, batchSize: 50, maxWaitMillis: 200, clock: virtualNow });
    virtualHandles.push(h);
    const [p] = await push(vb, src, [1, 2, 3, 4, 5].map((n) => ({ n })));
    await eventually(async () => (await cursorOf(vb, `streams.${queryId}`, src)) === '5', 8000);
    // Eleven quiet minutes pass: past the old 5-minute horizon, and past the window's end.
    await advance(11);
    const got = await collectUntil(vb, sink, (all) => all.length >= 1, 5000, 600);
    expect(got.map((m) => m.data)).toEqual([{ count: 5 }]);
    expect(await windowRows(vb, h.queryUuid, p!.partition_id)).toEqual([]);
    expect(h.metrics().flushCyclesTotal).toBe(1);
  });

  it('I13.7 a runner restarted after its source went quiet 10 minutes ago still flushes the open window it finds in state', async () => {
    const { src, sink, queryId } = await virtualNames('flush-restart');
    const run = () =>
      Stream.from(vqueen.queue(src))
        .windowTumbling({ seconds: 600, idleFlushMs: 100 })
        .aggregate({ count: () => 1 })
        .to(vqueen.queue(sink))
        .run({ queryId, url: vb.url, batchSize: 50, maxWaitMillis: 200, clock: virtualNow });
    const first = await run();
    const [p] = await push(vb, src, [1, 2, 3].map((n) => ({ n })));
    await eventually(async () => (await cursorOf(vb, `streams.${queryId}`, src)) === '3', 8000);
    await first.stop();
    // Ten quiet minutes: the partition's last activity is now 10 minutes old.
    await advance(10);

    const second = await run();
    virtualHandles.push(second);
    // A message on another partition: the new runner learns the broker's clock from its createdAt (its
    // /health Date sample is the broker process's real clock, which the moved database clock has left behind).
    await push(vb, src, [{ n: 9 }], 'other');
    await eventually(async () => (await cursorOf(vb, `streams.${queryId}`, src, 'other')) === '1', 8000);
    await advance(1);
    const ofDefault = (all: { partition: string }[]) => all.filter((m) => m.partition === 'Default');
    const got = ofDefault(await collectUntil(vb, sink, (all) => ofDefault(all).length >= 1, 5000, 600));
    expect(got.map((m) => m.data)).toEqual([{ count: 3 }]);
    expect(await windowRows(vb, second.queryUuid, p!.partition_id)).toEqual([]);
  });

  it('I13.7 a cycle whose answer was lost (it committed) does not keep its partition out of the flush: the window closes with its exact count', async () => {
    const { src, sink, queryId } = await names('flush-lost');
    const { url, cut } = await answerLosingProxy(b.url);
    const lost: string[] = [];
    const errors: string[] = [];
    const h = track(
      await Stream.from(queen.queue(src))
        .windowTumbling({ seconds: 2, idleFlushMs: 100 })
        .aggregate({ count: () => 1 })
        .to(queen.queue(sink))
        .run({ queryId, url, batchSize: 50, maxWaitMillis: 200, onError: (e) => errors.push(e.message) }),
    );
    h.on('lease:lost', (e) => lost.push(e.code));
    const [p] = await push(b, src, [1, 2, 3].map((n) => ({ n })));
    await eventually(async () => cut() === 1, 8000);
    // The cycle did commit: the source is consumed, though the runner never heard so.
    expect(await cursorOf(b, `streams.${queryId}`, src)).toBe('3');
    // Its resend found the lease gone (or the client gave up): no commit is known to the runner.
    await eventually(async () => lost.length + errors.length > 0, 8000);
    expect(h.metrics().cyclesTotal).toBe(0);

    const got = await collectUntil(b, sink, (all) => all.length >= 1, 8000, 600);
    expect(got.map((m) => m.data)).toEqual([{ count: 3 }]);
    expect(await windowRows(b, h.queryUuid, p!.partition_id)).toEqual([]);
  });
});
