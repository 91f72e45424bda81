import { getEventListeners } from 'node:events';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { PushNotifier } from '../wait/notifier.js';

// Long-poll waits must leave nothing behind on the broker-lifetime shutdown
// signal. AbortSignal.any([request, shutdown]) per wait did: on Node 20 the
// shutdown signal keeps an entry per combination until it aborts (~1 KB per
// parked-pop iteration, forever). Parked pops now add nothing to it at all:
// shutdown wakes every waiter (wait-room.ts park), so 10,000 parked pops are
// not 10,000 listeners (nor Node's MaxListenersExceededWarning).

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
  it('parked pops add no listener and no derived signal to the shutdown signal', async () => {
    const shutdown = b.ctx.shutdown;
    const listenersBefore = getEventListeners(shutdown, 'abort').length;
    const q = uniqueName('leak');
    // Each pop parks at least once (empty queue), some several times (1 s re-checks are not reached at 400 ms; wake-ups by pushes are).
    const pops = Array.from({ length: 40 }, () => b.http('GET', `/api/v1/pop/queue/${q}?wait=true&timeout=400`));
    await eventually(async () => b.ctx.notifier.room.parked === 40, 5000, 10);
    expect(getEventListeners(shutdown, 'abort').length).toBe(listenersBefore);
    expect((await Promise.all(pops)).map((r) => r.status)).toEqual(pops.map(() => 204));
    expect(getEventListeners(shutdown, 'abort').length).toBe(listenersBefore);
    expect(dependants(shutdown)).toBe(0);
  });

  it('200k waits, woken or let out through their door: heap flat', async () => {
    setFlagsFromString('--expose_gc');
    const gc = runInNewContext('gc') as () => void;
    const notifier = new PushNotifier('postgres://unused', pino({ level: 'silent' }));
    const round = async (n: number) => {
      for (let i = 0; i < n; i++) {
        let leave: (() => void) | undefined;
        const waited = notifier.room.park('q', 'g', null, 1000, (l) => (leave = l));
        // Woken at once (no timer to wait for), or let out.
        if (i % 2) notifier.notify('q');
        else leave!();
        await waited;
      }
    };
    await round(10000); // warm up
    gc();
    const before = process.memoryUsage().heapUsed;
    await round(200000);
    gc();
    const grownMb = (process.memoryUsage().heapUsed - before) / 1e6;
    expect(notifier.room.parked).toBe(0);
    // AbortSignal.any per wait kept ~12 MB here on Node 20.
    expect(grownMb).toBeLessThan(3);
  });
});
