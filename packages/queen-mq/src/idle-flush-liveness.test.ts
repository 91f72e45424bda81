import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, sleep, type TestBroker } from '@queen-mq/testing';
import { type Queen, Stream } from './index.js';
import { collectUntil, cursorOf, push, stateRows, useStreamBroker } from '../test/helpers.js';

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
beforeAll(() => {
  ({ b, queen } = env);
});
afterAll(async () => {
  // The runner behind it may still hold keep-alive connections.
  proxy?.closeAllConnections();
  await new Promise((r) => (proxy ? proxy.close(r) : r(undefined)));
});

const MINUTE = 60_000;

/** A clock seam for run(): real time plus a jump the test moves forward. */
function fakeClock() {
  const clock = { jumpMs: 0, now: () => Date.now() + clock.jumpMs };
  return clock;
}

/** Moves a fake clock forward a minute at a time, letting the flush tick between steps. */
async function advance(clock: { jumpMs: number }, minutes: number) {
  for (let i = 0; i < minutes; i++) {
    clock.jumpMs += MINUTE;
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
  it('I13.7 a 10-minute window on a partition quiet for longer than 5 minutes is emitted once, exact count (fake clock)', async () => {
    const { src, sink, queryId } = await names('flush-long');
    const clock = fakeClock();
    const h = track(
      await Stream.from(queen.queue(src))
        .windowTumbling({ seconds: 600, idleFlushMs: 100 })
        .aggregate({ count: () => 1 })
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, batchSize: 50, maxWaitMillis: 200, clock: clock.now }),
    );
    const [p] = await push(b, src, [1, 2, 3, 4, 5].map((n) => ({ n })));
    await eventually(async () => (await cursorOf(b, `streams.${queryId}`, src)) === '5', 8000);
    // Eleven quiet minutes pass on the runner's clock: past the old 5-minute horizon, and past the window's end.
    await advance(clock, 11);
    const got = await collectUntil(b, sink, (all) => all.length >= 1, 5000, 600);
    expect(got.map((m) => m.data)).toEqual([{ count: 5 }]);
    expect(await stateRows(b, h.queryUuid, p!.partition_id)).toEqual([]);
    expect(h.metrics().flushCyclesTotal).toBe(1);
  });

  it('I13.7 a runner restarted after its source went quiet 10 minutes ago still flushes the open window it finds in state', async () => {
    const { src, sink, queryId } = await names('flush-restart');
    const run = (clock?: () => number) =>
      Stream.from(queen.queue(src))
        .windowTumbling({ seconds: 600, idleFlushMs: 100 })
        .aggregate({ count: () => 1 })
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, batchSize: 50, maxWaitMillis: 200, ...(clock ? { clock } : {}) });
    const first = await run();
    const [p] = await push(b, src, [1, 2, 3].map((n) => ({ n })));
    await eventually(async () => (await cursorOf(b, `streams.${queryId}`, src)) === '3', 8000);
    await first.stop();
    // The partition's last activity is now 10 minutes old, as after a quiet spell.
    await b.sql.query(`update queen.partitions set last_activity = now() - interval '10 minutes' where id = $1`, [p!.partition_id]);

    const clock = fakeClock();
    const second = track(await run(clock.now));
    await advance(clock, 11);
    const got = await collectUntil(b, sink, (all) => all.length >= 1, 5000, 600);
    expect(got.map((m) => m.data)).toEqual([{ count: 3 }]);
    expect(await stateRows(b, second.queryUuid, p!.partition_id)).toEqual([]);
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
    expect(await stateRows(b, h.queryUuid, p!.partition_id)).toEqual([]);
  });
});
