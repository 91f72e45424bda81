import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBroker, testStream, uniqueName, type TestBroker, type TestStream } from '@queen-mq/testing';
import { Stream } from './index.js';
import { emitData as data, iso, withBounds } from '../test/helpers.js';

// Event-time idleness (idleTimeoutMs): a partition quiet for longer than the
// timeout has its watermark advanced by the broker's clock,
// watermark(now) = W + (now − quietSince − idleTimeoutMs), so its windows
// close on the idle flush; exact emits on a virtual clock.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker({ virtualClock: '2026-01-05T10:00:00.000Z' });
});
afterAll(async () => b?.stop());

const sources = new WeakMap<TestStream, string>();
const sourceOf = (t: TestStream) => sources.get(t)!;

/** A tumbling minute on event time with idleness; S = the next whole minute of the virtual clock. */
async function minuteChain(options: { allowedLateness?: number; gracePeriod?: number } = {}): Promise<{ t: TestStream; S: number }> {
  const src = uniqueName('idle');
  const t = await testStream(
    Stream.from<{ ts: number; n: number }>({ name: src })
      .windowTumbling({ seconds: 60, eventTime: (m) => m.data.ts, idleTimeoutMs: 10_000, idleFlushMs: 1000, ...options })
      .aggregate({ count: () => 1, sum: (m) => m.n })
      .map(withBounds)
      .to({ name: `${src}.out` }),
    { broker: b },
  );
  sources.set(t, src);
  const S = Math.ceil((t.now() + 1) / 60_000) * 60_000;
  return { t, S };
}

describe('event-time idleness', () => {
  it('a quiet partition closes its window idleTimeoutMs after the watermark could have reached the end; a later message continues from the idled watermark', async () => {
    const { t, S } = await minuteChain();
    try {
      await t.advanceTo(S + 5_000);
      expect(await t.push([{ ts: S + 5_000, n: 1 }])).toEqual([]);
      // Quiet since S+5 s: watermark(now) = S+5 s + (now − (S+5 s) − 10 s) = now − 10 s, which reaches S+60 s at S+70 s.
      expect(await t.advanceTo(S + 69_999)).toEqual([]);
      expect(data(await t.advanceTo(S + 70_000))).toEqual([{ count: 1, sum: 1, start: iso(S), end: iso(S + 60_000) }]);
      // The advance is persisted with the delete; the quiet anchor moves to now − idleTimeoutMs.
      expect((await t.state({ bookkeeping: true })).map((r) => [r.key, r.value])).toEqual([['__wm__', { eventTimeMs: S + 60_000, quietSinceMs: S + 60_000 }]]);

      // At S+90 s the watermark has idled to S+80 s: an event of S+62 s is on time (its minute ends at S+120 s) …
      await b.clock!.set(S + 90_000);
      expect(await t.push([{ ts: S + 62_000, n: 2 }])).toEqual([]);
      expect((await t.state({ bookkeeping: true })).find((r) => r.key === '__wm__')!.value).toEqual({ eventTimeMs: S + 80_000, quietSinceMs: S + 90_000 });
      // … one of S+30 s is late (its minute closed), dropped and counted.
      expect(await t.push([{ ts: S + 30_000, n: 100 }])).toEqual([]);
      expect(t.metrics().lateEventsTotal).toBe(1);
      // Quiet again from S+90 s: watermark(now) = S+80 s + (now − S−100 s) reaches S+120 s at S+140 s.
      expect(await t.advanceTo(S + 139_999)).toEqual([]);
      expect(data(await t.advanceTo(S + 140_000))).toEqual([{ count: 1, sum: 2, start: iso(S + 60_000), end: iso(S + 120_000) }]);
      expect(t.errors).toEqual([]);
    } finally {
      await t.stop();
    }
  });

  it('a message pending on the partition is activity: the flush does not idle it forward until the message is processed', async () => {
    const { t, S } = await minuteChain();
    try {
      await t.advanceTo(S + 5_000);
      await t.push([{ ts: S + 5_000, n: 1 }]);
      await b.clock!.set(S + 80_000);
      // Pushed but not yet popped (lag 1): the flush at S+80 s (idle watermark S+70 s) closes nothing.
      const res = await b.http('POST', '/api/v1/push', { items: [{ queue: sourceOf(t), payload: { ts: S + 6_000, n: 2 } }] });
      expect(res.status).toBe(201);
      expect(await t.flush()).toEqual([]);
      // Processed, its batch is judged at its createdAt (S+80 s): late, and the minute closes in that cycle.
      expect(data(await t.push([]))).toEqual([{ count: 1, sum: 1, start: iso(S), end: iso(S + 60_000) }]);
      expect(t.metrics().lateEventsTotal).toBe(1);
    } finally {
      await t.stop();
    }
  });

  it('with allowedLateness and gracePeriod: a quiet window closes idleTimeoutMs + allowedLateness + gracePeriod after its end', async () => {
    const { t, S } = await minuteChain({ allowedLateness: 5, gracePeriod: 3 });
    try {
      await t.advanceTo(S + 5_000);
      await t.push([{ ts: S + 5_000, n: 1 }]); // watermark S+5 s − 5 s = S
      // watermark(now) = S + (now − (S+5 s) − 10 s) must reach S+60 s + 3 s grace: now = S+78 s (60 + 10 + 5 + 3).
      expect(await t.advanceTo(S + 77_999)).toEqual([]);
      expect(data(await t.advanceTo(S + 78_000))).toEqual([{ count: 1, sum: 1, start: iso(S), end: iso(S + 60_000) }]);
    } finally {
      await t.stop();
    }
  });

  it('deterministic without a flush: a batch arriving after a quiet period is judged against the watermark idled to at its createdAt', async () => {
    const { t, S } = await minuteChain();
    try {
      await t.advanceTo(S + 5_000);
      await t.push([{ ts: S + 5_000, n: 1 }]);
      // No flush runs (the clock is set directly): at S+100 s the partition had idled to S+90 s.
      await b.clock!.set(S + 100_000);
      const emits = await t.push([{ ts: S + 30_000, n: 100 }, { ts: S + 95_000, n: 4 }]);
      // The S+30 s event is late; the open minute closes in this cycle; S+95 s opens the next one.
      expect(data(emits)).toEqual([{ count: 1, sum: 1, start: iso(S), end: iso(S + 60_000) }]);
      expect(t.metrics().lateEventsTotal).toBe(1);
      expect((await t.state({ bookkeeping: true })).map((r) => [r.key.split('\u001f')[1] ?? r.key, r.value.acc ?? r.value])).toEqual([
        ['__wm__', { eventTimeMs: S + 95_000, quietSinceMs: S + 100_000 }],
        [iso(S + 60_000), { count: 1, sum: 4 }],
      ]);
    } finally {
      await t.stop();
    }
  });

  it('a session window: the quiet session closes once the idled watermark is past its inclusive end', async () => {
    const src = uniqueName('idle-sess');
    const t = await testStream(
      Stream.from<{ ts: number }>({ name: src })
        .windowSession({ gap: 10, eventTime: (m) => m.data.ts, idleTimeoutMs: 10_000 })
        .aggregate({ count: () => 1 })
        .map(withBounds)
        .to({ name: `${src}.out` }),
      { broker: b },
    );
    try {
      const S = t.now();
      await t.push([{ ts: S }]);
      // Session [S, S+10 s]; watermark(now) = S + (now − S − 10 s) must pass S+10 s.
      expect(await t.advanceTo(S + 20_000)).toEqual([]);
      expect(data(await t.advanceTo(S + 20_001))).toEqual([{ count: 1, start: iso(S), end: iso(S + 10_000) }]);
    } finally {
      await t.stop();
    }
  });

  it('options: positive, event time only, needs the flush timer; not part of the config hash', () => {
    const chain = (o: object) => Stream.from({ name: 'src' }).windowTumbling({ seconds: 60, ...o }).aggregate({ count: () => 1 }).to({ name: 'out' });
    const eventTime = (m: any) => m.data.ts;
    expect(() => chain({ eventTime, idleTimeoutMs: -1 })).toThrow(/idleTimeoutMs must be a positive number, got -1$/);
    expect(() => chain({ eventTime, idleTimeoutMs: 0 })).toThrow(/idleTimeoutMs must be a positive number, got 0$/);
    expect(() => chain({ idleTimeoutMs: 1000 })).toThrow(/the tumbling window: idleTimeoutMs is for event-time windows: pass eventTime too/);
    expect(() => chain({ eventTime, idleTimeoutMs: 1000, idleFlushMs: 0 })).toThrow(/idleTimeoutMs needs the idle-flush timer \(idleFlushMs > 0\)/);
    expect(() => chain({ eventTime, idleTimeOutMs: 1000 })).toThrow(/unknown option "idleTimeOutMs" \(did you mean "idleTimeoutMs"\?\)/);
    expect(chain({ eventTime, idleTimeoutMs: 1000 }).compile().configHash).toBe(chain({ eventTime }).compile().configHash);
  });
});
