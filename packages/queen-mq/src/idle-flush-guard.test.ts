import type { PoolClient } from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleep, startTestBroker, testStream, uniqueName, type TestBroker, type TestStream } from '@queen-mq/testing';
import { Stream } from './index.js';
import { emitData as data, iso, withBounds } from '../test/helpers.js';

// Issue 28 item 1: an idle flush closed a processing-time window while a
// push stamped before its end was still committing. The flush saw the
// broker's clock past the end and lag 0 (the push had not moved the head),
// closed the window without those items, and when they were read the window
// was made again and its emit answered `duplicate` at the sink: they were
// lost. The push is held open here on purpose, from a second database
// connection: the allocator runs inside an open transaction, so its items are
// stamped and the partition row stays locked until the test commits. The
// flush runs meanwhile; after the commit every item must be counted once.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker({ virtualClock: '2026-01-05T10:00:00.000Z' });
});
afterAll(async () => b?.stop());

/**
 * The race, held open on purpose: `payloads` are pushed to `t`'s source
 * (Default partition) at the current virtual time from a second connection
 * and left uncommitted, so their partition row stays locked and the group's
 * lag reads 0. The clock moves to `flushAt` and one idle flush starts; the
 * push commits 300 ms later. Then the runner reads what it had not seen and
 * flushes once more.
 */
async function flushAcrossHeldPush(t: TestStream, source: string, payloads: unknown[], flushAt: number): Promise<void> {
  const { rows } = await b.sql.query(`select id from queen.partitions where queue_name = $1 and name = 'Default'`, [source]);
  const held: PoolClient = await b.sql.connect();
  try {
    await held.query('begin');
    const items = JSON.stringify(payloads.map((payload) => ({ payload })));
    const stamped = await held.query('select count(*)::int as n from queen.log_append_v1($1::uuid, $2::jsonb, null)', [rows[0].id, items]);
    expect(stamped.rows[0].n).toBe(payloads.length);
    await b.clock!.set(flushAt);
    const flushed = t.flush();
    await sleep(300);
    await held.query('commit');
    await flushed;
  } finally {
    await held.query('rollback').catch(() => undefined);
    held.release();
  }
  await t.push([]);
  await t.flush();
}

/** A processing-time count per 1 s tumbling window of `src`, flushed every 50 ms, with its bounds. */
function oneSecondCounts(src: string): Promise<TestStream> {
  return testStream(
    Stream.from<{ n: number }>({ name: src })
      .windowTumbling({ seconds: 1, idleFlushMs: 50 })
      .aggregate({ count: () => 1 })
      .map(withBounds)
      .to({ name: `${src}.out` }),
    { broker: b },
  );
}

describe('idle flush against a push in flight', () => {
  it('I28.1 processing time: a push stamped before the window end commits after an idle flush began; every item is counted once (Σ count = pushed)', async () => {
    const src = uniqueName('inflight');
    const t = await oneSecondCounts(src);
    try {
      const S = Math.ceil((t.now() + 1) / 1000) * 1000;
      await t.advanceTo(S + 100);
      // One message opens [S, S+1 s) and is consumed.
      expect(await t.push([{ n: 0 }])).toEqual([]);
      await t.advanceTo(S + 900);
      // 1,000 items stamped at S+900 ms, not committed: lag reads 0.
      const HELD = 1000;
      // The flush at S+1.1 s may close nothing while a message stamped before S+1 s is pending, committed or not.
      await flushAcrossHeldPush(t, src, Array.from({ length: HELD }, (_, i) => ({ n: i + 1 })), S + 1100);
      expect(data(t.emits()).reduce((s: number, e: any) => s + e.count, 0)).toBe(HELD + 1);
      expect(data(t.emits())).toEqual([{ count: HELD + 1, start: iso(S), end: iso(S + 1000) }]);
      expect(t.errors).toEqual([]);
      // Only the close horizon stays: no window row is left open.
      expect((await t.state({ bookkeeping: true })).map((r) => r.key.split('\u001f').pop())).toEqual(['__closed__']);
    } finally {
      await t.stop();
    }
  });

  it('I28.1 processing time: a push held in the NEXT window (no row yet) while a flush closes the previous one is not judged late by the close horizon the flush writes', async () => {
    const src = uniqueName('inflight-next');
    const t = await oneSecondCounts(src);
    try {
      const S = Math.ceil((t.now() + 1) / 1000) * 1000;
      await t.advanceTo(S + 100);
      // [S, S+1 s) is open with one message.
      expect(await t.push([{ n: 0 }])).toEqual([]);
      // 10 items stamped at S+1.2 s, in [S+1 s, S+2 s), which has no row yet; held uncommitted from a second
      // connection. Only the database clock moves: no flush runs before the one below, so [S, S+1 s) is still open.
      await b.clock!.set(S + 1200);
      // The flush at S+2.1 s closes [S, S+1 s) and writes the close horizon S+2.1 s: past the end of the held items'
      // window. A guard on the closed window's end alone (S+1 s) let it commit, and the items were then judged late
      // on arrival (lateEventsTotal 10, their window never emitted).
      await flushAcrossHeldPush(t, src, Array.from({ length: 10 }, (_, i) => ({ n: i + 1 })), S + 2100);
      expect(t.metrics().lateEventsTotal).toBe(0);
      expect(data(t.emits())).toEqual([
        { count: 1, start: iso(S), end: iso(S + 1000) },
        { count: 10, start: iso(S + 1000), end: iso(S + 2000) },
      ]);
      expect(t.errors).toEqual([]);
    } finally {
      await t.stop();
    }
  });

  it('I28.1 event time with idleTimeoutMs: a push stamped before the idle advance commits after the flush began; the partition was not idle, its event is counted, not late', async () => {
    const src = uniqueName('inflight-et');
    const t = await testStream(
      Stream.from<{ ts: number; n: number }>({ name: src })
        .windowTumbling({ seconds: 60, eventTime: (m) => m.data.ts, idleTimeoutMs: 10_000, idleFlushMs: 1000 })
        .aggregate({ count: () => 1, sum: (m) => m.n })
        .map(withBounds)
        .to({ name: `${src}.out` }),
      { broker: b },
    );
    try {
      const S = Math.ceil((t.now() + 1) / 60_000) * 60_000;
      await t.advanceTo(S + 5_000);
      expect(await t.push([{ ts: S + 5_000, n: 1 }])).toEqual([]);
      // Stamped at S+10 s, when the partition had been quiet for 5 s only: its batch is judged at that watermark (S+5 s).
      await b.clock!.set(S + 10_000);
      // Flushed at S+80 s with lag 0, but a message stamped before then is pending: nothing may idle forward.
      await flushAcrossHeldPush(t, src, [{ ts: S + 20_000, n: 2 }], S + 80_000);
      expect(t.metrics().lateEventsTotal).toBe(0);
      expect(data(t.emits())).toEqual([{ count: 2, sum: 3, start: iso(S), end: iso(S + 60_000) }]);
      expect(t.errors).toEqual([]);
    } finally {
      await t.stop();
    }
  });
});
