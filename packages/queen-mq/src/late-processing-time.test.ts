import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBroker, testStream, uniqueName, type TestBroker } from '@queen-mq/testing';
import { Stream } from './index.js';
import { drain } from '../test/helpers.js';

// Processing time: a value read after its window was emitted (a message
// stamped before the window's end but read after an idle flush closed it; a
// consumer-group seek back) is a late contribution — counted, handed to
// onLate — and never re-creates the window, whose emit would carry the same
// deterministic transactionId and be answered `duplicate` by the sink: gone
// without a trace. And when a window is emitted twice anyway, the duplicate
// answer is reported (WINDOW_REEMITTED), never silent.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker({ virtualClock: '2026-01-05T10:00:00.000Z' });
});
afterAll(async () => b?.stop());

/** Moves the query's consumer group back to the start of the source partition: the runner reads its messages again. */
async function seekBack(src: string, queryId: string): Promise<void> {
  const res = await b.http('POST', `/api/v1/consumer-groups/${encodeURIComponent(`streams.${queryId}`)}/queues/${encodeURIComponent(src)}/partitions/Default/seek`, { offset: '0' });
  expect(res.body).toMatchObject({ success: true, cursorMovedTo: '0' });
}

/** A processing-time minute over `src` (count and sum of n), its results on `<src>.out`. */
const minuteOf = (src: string, onLate?: object) =>
  Stream.from<{ n: number }>({ name: src })
    .windowTumbling({ seconds: 60, ...(onLate ? { onLate } : {}) })
    .aggregate({ count: () => 1, sum: (m) => m.n })
    .to({ name: `${src}.out` });

describe('processing time: a value for a window already emitted is late', () => {
  it('a window closed by the idle flush, then its messages read again: each is one late record, the window is not emitted again', async () => {
    const src = uniqueName('ptl-src');
    const late = uniqueName('ptl-late');
    const t = await testStream(minuteOf(src, { name: late }), { broker: b });
    try {
      const T = t.now(); // 10:00:00.000 when this test runs first; any minute boundary will do
      expect(T % 60_000).toBe(0);
      expect(await t.push([{ n: 1 }, { n: 2 }])).toEqual([]);
      // The idle flush closes [10:00, 10:01) on the broker's clock (the partition is caught up).
      const closed = await t.advance(61_000);
      expect(closed.map((e) => e.data)).toEqual([{ count: 2, sum: 3 }]);

      // The group reads both messages again (a seek back): their window was emitted.
      await seekBack(src, t.queryId);
      expect(await t.advance(1_000)).toEqual([]);
      const records = (await drain(b, late, 'read')).map((r) => r.data);
      expect(records).toEqual([
        expect.objectContaining({ offset: '1', eventTimeMs: T, window: { start: T, end: T + 60_000 }, watermarkMs: T + 61_000, latenessMs: 1_000, value: { n: 1 } }),
        expect.objectContaining({ offset: '2', eventTimeMs: T, window: { start: T, end: T + 60_000 }, watermarkMs: T + 61_000, latenessMs: 1_000, value: { n: 2 } }),
      ]);
      expect(t.metrics()).toMatchObject({ lateEventsTotal: 2, windowsReemittedTotal: 0 });
      // Nothing re-opened: no window row, only the close horizon; no second emit however long we wait.
      expect((await t.state({ bookkeeping: true })).map((r) => r.key.split('\u001f').slice(1).join('/'))).toEqual(['__closed__']);
      expect(await t.advance(120_000)).toEqual([]);
      expect(t.emits()).toHaveLength(1);
      expect(t.errors).toEqual([]);

      // A new message after that opens its own window as usual.
      expect(await t.push([{ n: 5 }])).toEqual([]);
      expect((await t.advance(60_000)).map((e) => e.data)).toEqual([{ count: 1, sum: 5 }]);
      expect(await drain(b, late, 'read')).toEqual([]);
    } finally {
      await t.stop();
    }
  });

  it('onLate "drop" (the default): the late values are counted, not lost silently', async () => {
    const src = uniqueName('ptd-src');
    const t = await testStream(minuteOf(src), { broker: b });
    try {
      await t.push([{ n: 1 }]);
      expect((await t.advance(61_000)).map((e) => e.data)).toEqual([{ count: 1, sum: 1 }]);
      await seekBack(src, t.queryId);
      await t.advance(120_000);
      expect(t.emits()).toHaveLength(1);
      expect(t.metrics()).toMatchObject({ lateEventsTotal: 1, windowsReemittedTotal: 0 });
      expect(t.errors).toEqual([]);
    } finally {
      await t.stop();
    }
  });

  it('a window emitted twice anyway (here: its close horizon removed by hand) is reported WINDOW_REEMITTED, counted and announced', async () => {
    const src = uniqueName('ptr-src');
    const t = await testStream(minuteOf(src), { broker: b });
    try {
      const start = Math.floor(t.now() / 60_000) * 60_000;
      await t.push([{ n: 1 }]);
      expect((await t.advance(61_000)).map((e) => e.data)).toEqual([{ count: 1, sum: 1 }]);
      // Remove what the late rule relies on, as a race it does not see would.
      const [horizon] = await t.state({ bookkeeping: true });
      expect(horizon!.key.endsWith('\u001f__closed__')).toBe(true);
      const del = await b.http('POST', '/streams/v1/cycle', { query_id: t.queryUuid, partition_id: horizon!.partitionId, state_ops: [{ type: 'delete', key: horizon!.key, expected_version: horizon!.version }], ack: null });
      expect(del.body.success).toBe(true);
      await seekBack(src, t.queryId);
      // The window is re-created and closed again: its emit is answered duplicate.
      expect(await t.advance(61_000)).toEqual([]);
      expect(t.metrics()).toMatchObject({ windowsReemittedTotal: 1 });
      expect(t.errors).toHaveLength(1);
      expect(t.errors[0]!.error).toMatchObject({ code: 'WINDOW_REEMITTED' });
      expect(t.errors[0]!.error.message).toContain(`[${new Date(start).toISOString()}, ${new Date(start + 60_000).toISOString()})`);
      expect(t.errors[0]!.info).toMatchObject({ phase: 'flush', partitionId: horizon!.partitionId });
    } finally {
      await t.stop();
    }
  });
});
