import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { cycleBody, type CycleResult } from '@queen-mq/protocol';
import { StreamCounters } from './stream-counters.js';

// The per-query counters of the cycle route, without HTTP (console-routes.test.ts
// covers them over the wire): what counts as a cycle, a flush, an error, and
// which ids a snapshot forgets.

const body = (queryId: string, ack: boolean) =>
  cycleBody.parse({ query_id: queryId, partition_id: randomUUID(), ack: ack ? { transactionId: 't1' } : null });
const answer = (success: boolean, code?: string, queued = 0, duplicate = 0): CycleResult =>
  ({ success, code, push_counts: { queued, duplicate } }) as unknown as CycleResult;

describe('StreamCounters', () => {
  it('counts committed cycles, ack:null flushes, stored sink messages, duplicates and failures; never an unknown query', () => {
    const c = new StreamCounters();
    const q = randomUUID();
    c.recordResult(body(q, true), answer(true, undefined, 2));
    c.recordResult(body(q, false), answer(true, undefined, 1, 2));
    c.recordResult(body(q, true), answer(false, 'VERSION_CONFLICT'));
    c.recordError(q, 'DB_UNAVAILABLE');
    c.recordResult(body(randomUUID(), true), answer(false, 'QUERY_NOT_FOUND'));
    c.recordError(randomUUID(), 'DB_UNAVAILABLE');
    expect(c.size).toBe(1);
    const snap = c.snapshot(new Set([q]), performance.now()).get(q)!;
    expect(snap).toMatchObject({ cycles: 2, flushes: 1, emitted: 3, duplicates: 2, errors: 2, lastErrorCode: 'DB_UNAVAILABLE' });
    expect(snap.lastCycleAt).toBeGreaterThan(Date.now() - 5000);
  });

  it('a snapshot forgets ids counted before its read that the read did not find, and keeps ids counted after it', () => {
    const c = new StreamCounters();
    const dropped = randomUUID();
    c.recordResult(body(dropped, true), answer(true));
    const readAt = performance.now();
    const registeredSince = randomUUID();
    c.recordResult(body(registeredSince, true), answer(true));
    expect(c.snapshot(new Set(), readAt).size).toBe(0);
    expect(c.size).toBe(1);
    expect([...c.snapshot(new Set([registeredSince]), performance.now()).keys()]).toEqual([registeredSince]);
  });
});
