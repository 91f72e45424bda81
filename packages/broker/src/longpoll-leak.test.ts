import { getEventListeners } from 'node:events';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { PushNotifier } from './notifier.js';

// Long-poll waits must leave nothing behind on the broker-lifetime shutdown
// signal. AbortSignal.any([request, shutdown]) per wait did: on Node 20 the
// shutdown signal keeps an entry per combination until it aborts (~1 KB per
// parked-pop iteration, forever).

/** Signals Node tracks as derived from `signal` (AbortSignal.any); 0 where Node does not expose the set. */
function dependants(signal: AbortSignal): number {
  const key = Object.getOwnPropertySymbols(signal).find((s) => s.description === 'kDependantSignals');
  return key ? ((signal as any)[key]?.size ?? 0) : 0;
}

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

describe('long-poll leaks', () => {
  it('parked pops leave no listener and no derived signal on the shutdown signal', async () => {
    const shutdown = b.ctx.shutdown;
    const listenersBefore = getEventListeners(shutdown, 'abort').length;
    const q = uniqueName('leak');
    // Each pop parks at least once (empty queue), some several times (1 s re-checks are not reached at 150 ms; wake-ups by pushes are).
    const pops = Array.from({ length: 40 }, () => b.http('GET', `/api/v1/pop/queue/${q}?wait=true&timeout=150`));
    expect((await Promise.all(pops)).map((r) => r.status)).toEqual(pops.map(() => 204));
    expect(getEventListeners(shutdown, 'abort').length).toBe(listenersBefore);
    expect(dependants(shutdown)).toBe(0);
  });

  it('200k waits against one long-lived signal: listeners gone and heap flat', async () => {
    setFlagsFromString('--expose_gc');
    const gc = runInNewContext('gc') as () => void;
    const notifier = new PushNotifier('postgres://unused', pino({ level: 'silent' }));
    const shutdown = new AbortController();
    const round = async (n: number) => {
      for (let i = 0; i < n; i++) {
        const gone = new AbortController();
        const waited = notifier.room.park('q', 'g', null, 1000, gone.signal, shutdown.signal);
        notifier.notify('q'); // wakes it at once: no timer to wait for
        await waited;
      }
    };
    await round(10000); // warm up
    gc();
    const before = process.memoryUsage().heapUsed;
    await round(200000);
    gc();
    const grownMb = (process.memoryUsage().heapUsed - before) / 1e6;
    expect(getEventListeners(shutdown.signal, 'abort')).toHaveLength(0);
    expect(dependants(shutdown.signal)).toBe(0);
    // AbortSignal.any per wait kept ~12 MB here on Node 20.
    expect(grownMb).toBeLessThan(3);
  });
});
