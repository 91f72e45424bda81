import { describe, expect, it } from 'vitest';
import { Stream } from '../stream.js';
import { MERGING_END_RULE, type MergedWindow, type WindowBounds, type WindowPlugin } from '../plan/plugins.js';
import type { SourceMessage } from '../context/source-message.js';
import type { StateRow } from '../context/wire.js';
import { batchClock, foldWindowBatch, flushRipeRows, prepareWindowBatch } from './window-batch.js';
import { closeHorizonKey } from './close-horizon.js';
import { windowStateKey, openWindowStateKey } from '../plan/keys.js';
import { minuteWindow } from '../../test/minute-window.js';

// Processing time, pure: a close (cycle or idle flush) writes the partition's
// close horizon; a value read later for a window it emitted is late, not a
// fresh row whose emit the sink would answer `duplicate`.

const minute = minuteWindow(5000);
const H = closeHorizonKey('tumb:60');
const sink = { kind: 'queue', shape: { queue: 'sink' }, sinkQueue: 'sink', toPushItems: (v: unknown) => [{ queue: 'sink', payload: v }] };
const PID = '0195f0a0-0000-7000-8000-000000000003';
const T = Date.parse('2026-01-05T10:00:00.000Z');

function msg(offset: number, createdMs: number, data: unknown = { v: offset }): SourceMessage {
  return {
    id: `id-${offset}`, transactionId: `tx-${offset}`, traceId: null, data, producerSub: null,
    createdAt: new Date(createdMs).toISOString(), partitionId: PID, partition: 'Default', queue: 'src',
    leaseId: 'lease', consumerGroup: 'g', offset: String(offset), retryCount: 0,
  };
}

const plan = (window: WindowPlugin, opts: object = {}) =>
  Stream.from({ name: 'src' }).window(window, opts).aggregate({ count: () => 1, sum: (m: any) => m.v }).to(sink).compile();

const rows = (list: StateRow[]) => new Map(list.map((r) => [r.key, r]));
const W = windowStateKey('tumb:60', T, PID);
const openW: StateRow = { key: W, value: { acc: { count: 1, sum: 1 }, windowStart: T, windowEnd: T + 60_000 }, version: 3 };

/** One cycle over `messages` against `stored` (whole read: the ripe rows are the stored ones). */
function cycle(p: ReturnType<typeof plan>, stored: StateRow[], messages: SourceMessage[]) {
  const prepared = prepareWindowBatch(p, messages);
  const byKey = rows(stored);
  return foldWindowBatch(p, prepared, byKey, stored, batchClock(p, prepared, byKey));
}

describe('the close horizon (processing time)', () => {
  it('an idle flush that closes a window writes the horizon; one that closes nothing writes nothing', () => {
    const p = plan(minute);
    const flush = flushRipeRows(p, [openW], T + 61_000);
    expect(flush.stateOps).toEqual([
      { type: 'delete', key: W, expected_version: 3 },
      { type: 'upsert', key: H, value: { closedThroughMs: T + 61_000 }, expected_version: 0 },
    ]);
    expect(flushRipeRows(p, [openW], T + 59_000).stateOps).toEqual([]);
    // Raised, never lowered; at the version it was read.
    const stored: StateRow = { key: H, value: { closedThroughMs: T + 30_000 }, version: 7 };
    expect(flushRipeRows(p, [openW, stored], T + 61_000).stateOps[1]).toEqual({ type: 'upsert', key: H, value: { closedThroughMs: T + 61_000 }, expected_version: 7 });
    expect(flushRipeRows(p, [openW, { ...stored, value: { closedThroughMs: T + 90_000 } }], T + 61_000).stateOps).toEqual([{ type: 'delete', key: W, expected_version: 3 }]);
  });

  it('a cycle writes it only when it closes a window (the hot path adds nothing), at clock − grace', () => {
    const p = plan(minute, { gracePeriod: 10 });
    expect(cycle(p, [], [msg(1, T + 5_000)]).stateOps.map((o) => o.key)).toEqual([W]);
    const closing = cycle(p, [openW], [msg(2, T + 75_000)]);
    expect(closing.emits.map((e) => e.value)).toEqual([{ count: 1, sum: 1 }]);
    expect(closing.stateOps.find((o) => o.key === H)).toEqual({ type: 'upsert', key: H, value: { closedThroughMs: T + 65_000 }, expected_version: 0 });
  });

  it('a message stamped before an emitted window\'s end, read after it closed, is late: counted, to the onLate sink, never a fresh row', () => {
    const horizon: StateRow = { key: H, value: { closedThroughMs: T + 61_000 }, version: 1 };
    // Different content from what was emitted: v 9, stamped at 10:00:59.990.
    const late = [msg(5, T + 59_990, { v: 9 })];
    const dropped = cycle(plan(minute), [horizon], late);
    expect(dropped).toMatchObject({ lateDropped: 1, emits: [], stateOps: [], late: [] });

    const toSink = cycle(plan(minute, { onLate: sink }), [horizon], late);
    expect(toSink.stateOps).toEqual([]);
    expect(toSink.late).toEqual([expect.objectContaining({ windowKey: W, window: { start: T, end: T + 60_000 }, watermarkMs: T + 61_000, latenessMs: 1_000 })]);

    const included = cycle(plan(minute, { onLate: 'include' }), [horizon], late);
    expect(included.emits).toEqual([expect.objectContaining({ identity: `${W}\u001flate\u001f5`, value: { count: 1, sum: 9 } })]);
  });

  it('a window whose row is still stored is open, whatever the horizon: the value is folded', () => {
    const horizon: StateRow = { key: H, value: { closedThroughMs: T + 61_000 }, version: 1 };
    const fold = cycle(plan(minute, { onLate: sink }), [horizon, openW], [msg(6, T + 59_990, { v: 9 })]);
    expect(fold.late).toEqual([]);
    expect(fold.lateDropped).toBe(0);
    expect(fold.emits.map((e) => e.value)).toEqual([]);
    expect(fold.stateOps).toEqual([{ type: 'upsert', key: W, value: { acc: { count: 2, sum: 10 }, windowStart: T, windowEnd: T + 60_000 }, expected_version: 3 }]);
  });

  it('merging windows (sessions): a value joining no open session and ending strictly before the horizon is late', () => {
    const sess: WindowPlugin = {
      kind: 'test-session-pt',
      shape: { gap: 2 },
      tag: 'sessp:2',
      defaultIdleFlushMs: 1000,
      assign: (t) => [{ start: t, end: t + 2000 }],
      merging: MERGING_END_RULE,
      merge: (ws: readonly WindowBounds[]): MergedWindow[] => ws.map((w, i) => ({ ...w, merged: [i] })),
    };
    const p = plan(sess, { onLate: sink });
    const open: StateRow = { key: openWindowStateKey('sessp:2', PID), value: { acc: { count: 1, sum: 1 }, sessionStart: T, lastEventTime: T, windowEnd: T + 2000 }, version: 2 };
    const flush = flushRipeRows(p, [open], T + 2001);
    expect(flush.stateOps.map((o) => o.key)).toEqual([open.key, closeHorizonKey('sessp:2')]);
    const horizon: StateRow = { key: closeHorizonKey('sessp:2'), value: { closedThroughMs: T + 2001 }, version: 1 };
    // [T+0, T+2000] ended strictly before T+2001: late. [T+1, T+2001] ends at it (inclusive end): still open.
    const fold = cycle(p, [horizon], [msg(1, T), msg(2, T + 1)]);
    expect(fold.late.map((l) => [l.entry.offset, l.latenessMs])).toEqual([['1', 1]]);
  });
});
