import { describe, expect, it } from 'vitest';
import { Stream } from '../stream.js';
import { MERGING_END_RULE, type MergedWindow, type WindowBounds, type WindowPlugin } from '../plan/plugins.js';
import type { SourceMessage } from '../context/source-message.js';
import type { StateRow } from '../context/wire.js';
import { aggregateReducer } from '../plan/reducer.js';
import { batchClock, foldWindowBatch, flushRipeRows, prepareWindowBatch } from './window-batch.js';

// A session window written against core's interface only (gap 2 s, inclusive ends).
const GAP = 2000;
const sess: WindowPlugin = {
  kind: 'test-session',
  shape: { gap: 2 },
  tag: 'sess:2',
  defaultIdleFlushMs: 1000,
  assign: (t) => [{ start: t, end: t + GAP }],
  merging: MERGING_END_RULE,
  merge(ws: readonly WindowBounds[]): MergedWindow[] {
    const out: { start: number; end: number; merged: number[] }[] = [];
    for (const i of ws.map((_, i) => i).sort((a, b) => ws[a]!.start - ws[b]!.start)) {
      const w = ws[i]!;
      const last = out[out.length - 1];
      if (last && w.start <= last.end) {
        last.end = Math.max(last.end, w.end);
        last.merged.push(i);
      } else out.push({ start: w.start, end: w.end, merged: [i] });
    }
    return out;
  },
};
const sink = { kind: 'queue', shape: { queue: 'sink' }, sinkQueue: 'sink', toPushItems: (v: unknown) => [{ queue: 'sink', payload: v }] };
const PID = '0195f0a0-0000-7000-8000-000000000002';
const OPEN = `sess:2\u001fopen\u001f${PID}`;
const T = Date.parse('2026-01-05T10:00:00.000Z');

function msg(offset: number, data: unknown): SourceMessage {
  return {
    id: `id-${offset}`, transactionId: `tx-${offset}`, traceId: null, data, producerSub: null,
    createdAt: '2026-01-05T12:00:00.000000Z', partitionId: PID, partition: 'Default', queue: 'src',
    leaseId: 'lease', consumerGroup: 'g', offset: String(offset), retryCount: 0,
  };
}

const plan = (opts: object = {}) =>
  Stream.from({ name: 'src' })
    .window(sess, { eventTime: (m: any) => m.data.t, ...opts })
    .aggregate({ count: () => 1, sum: (m: any) => m.v })
    .to(sink)
    .compile();

/** Runs batches through fold like the runner does, keeping the state rows in a map. */
function runBatches(p: ReturnType<typeof plan>, batches: { t: number; v?: number }[][]) {
  const state = new Map<string, StateRow>();
  const emits: any[] = [];
  let offset = 0;
  for (const b of batches) {
    const prepared = prepareWindowBatch(p, b.map((d) => msg(++offset, { v: 1, ...d })));
    const clock = batchClock(p, prepared, state);
    const ripe = [...state.values()].filter((r) => typeof r.value?.windowEnd === 'number' && r.value.windowEnd <= clock! - p.window!.options.gracePeriodMs);
    const fold = foldWindowBatch(p, prepared, state, ripe, clock);
    emits.push(...fold.emits);
    for (const op of fold.stateOps) {
      const prev = state.get(op.key);
      expect(op.expected_version, op.key).toBe(prev?.version ?? 0);
      if (op.type === 'delete') state.delete(op.key);
      else state.set(op.key, { key: op.key, value: op.value, version: (prev?.version ?? 0) + 1 });
    }
  }
  return { state, emits };
}

describe('merging windows (sessions) in core', () => {
  it('S15 t+2.000 extends (inclusive), t+4.001 starts a new session and closes the first', () => {
    const { state, emits } = runBatches(plan(), [[{ t: T }, { t: T + 2000 }, { t: T + 4001 }]]);
    expect(emits.map((e) => [e.windowStart, e.windowEnd, e.value])).toEqual([[T, T + 4000, { count: 2, sum: 2 }]]);
    expect(emits[0].identity).toBe(`sess:2\u001f2026-01-05T10:00:00.000Z\u001f${PID}`);
    expect(state.get(OPEN)?.value).toEqual({ acc: { count: 1, sum: 1 }, sessionStart: T + 4001, lastEventTime: T + 4001, windowEnd: T + 6001 });
  });

  it('S16 one batch t, t+1.5 s, t+0.5 s → one open session of 3', () => {
    const { state, emits } = runBatches(plan(), [[{ t: T }, { t: T + 1500 }, { t: T + 500 }]]);
    expect(emits).toEqual([]);
    expect(state.get(OPEN)?.value).toEqual({ acc: { count: 3, sum: 3 }, sessionStart: T, lastEventTime: T + 1500, windowEnd: T + 3500 });
  });

  it('session merge: t, t+3 s, then t+1.5 s bridges them into ONE session of three (same batch, grace 0)', () => {
    const { state, emits } = runBatches(plan(), [[{ t: T, v: 1 }, { t: T + 3000, v: 10 }, { t: T + 1500, v: 100 }]]);
    expect(emits).toEqual([]);
    expect(state.get(OPEN)?.value).toEqual({ acc: { count: 3, sum: 111 }, sessionStart: T, lastEventTime: T + 3000, windowEnd: T + 5000 });
  });

  it('session merge across batches: the first session is held (grace) while a later one opens, then bridged', () => {
    const p = plan({ gracePeriod: 2 });
    const after2 = runBatches(p, [[{ t: T, v: 1 }], [{ t: T + 3000, v: 10 }]]);
    expect(after2.emits).toEqual([]);
    expect(after2.state.get(OPEN)?.value).toEqual({
      acc: { count: 1, sum: 10 }, sessionStart: T + 3000, lastEventTime: T + 3000, windowEnd: T + 5000,
      earlier: [{ acc: { count: 1, sum: 1 }, sessionStart: T, lastEventTime: T, windowEnd: T + 2000 }],
    });
    const all = runBatches(p, [[{ t: T, v: 1 }], [{ t: T + 3000, v: 10 }], [{ t: T + 1500, v: 100 }], [{ t: T + 7001 }]]);
    expect(all.emits.map((e) => [e.windowStart, e.windowEnd, e.value])).toEqual([[T, T + 5000, { count: 3, sum: 111 }]]);
    // without grace the first session is already closed when t+3 s arrives: two emits, no merge
    const strict = runBatches(plan(), [[{ t: T, v: 1 }], [{ t: T + 3000, v: 10 }], [{ t: T + 1500, v: 100 }], [{ t: T + 9000 }]]);
    expect(strict.emits.map((e) => e.value)).toEqual([{ count: 1, sum: 1 }, { count: 2, sum: 110 }]);
  });

  it('a session closes only once the clock is strictly past windowEnd (+ grace)', () => {
    const other = (t: number) => ({ t });
    // the watermark reaching exactly windowEnd does not close it: an event there would still extend it
    const atEnd = runBatches(plan(), [[{ t: T }], [other(T + 2000)]]);
    expect(atEnd.emits).toEqual([]);
    expect(atEnd.state.get(OPEN)?.value.acc).toEqual({ count: 2, sum: 2 });
    const flushAt = (ripeAtOrBefore: number) => flushRipeRows(plan(), [{ key: OPEN, value: { acc: { count: 1, sum: 1 }, sessionStart: T, lastEventTime: T, windowEnd: T + 2000 }, version: 4 }], ripeAtOrBefore);
    expect(flushAt(T + 2000).emits).toEqual([]);
    const f = flushAt(T + 2001);
    expect(f.stateOps).toEqual([{ type: 'delete', key: OPEN, expected_version: 4 }]);
    expect(f.emits[0]).toMatchObject({ identity: `sess:2\u001f2026-01-05T10:00:00.000Z\u001f${PID}`, windowEnd: T + 2000, value: { count: 1, sum: 1 } });
  });

  it('late events: dropped unless they join an open session; include re-emits with the late identity', () => {
    const late = (onLate: 'drop' | 'include') => runBatches(plan({ onLate }), [[{ t: T + 60000 }], [{ t: T, v: 999 }]]);
    const dropped = late('drop');
    expect(dropped.emits).toEqual([]);
    const inc = late('include');
    expect(inc.emits).toEqual([expect.objectContaining({ identity: `sess:2\u001f2026-01-05T10:00:00.000Z\u001f${PID}\u001flate\u001f2`, value: { count: 1, sum: 999 } })]);
    expect([...inc.state.keys()].sort()).toEqual(['__wm__', OPEN]);
  });

  it('reduce after a merging window needs { merge }; aggregate merges natively', () => {
    const base = Stream.from({ name: 'src' }).window(sess);
    expect(() => base.reduce((a: number) => a + 1, 0).to(sink).compile()).toThrow(/merges windows: pass \.reduce\(fn, initial, \{ merge \}\)/);
    expect(() => base.reduce((a: number) => a + 1, 0, { merge: (a, b) => a + b }).to(sink).compile()).not.toThrow();
    const agg = aggregateReducer({ count: () => 1, sum: (x: number) => x, min: (x: number) => x, max: (x: number) => x, avg: (x: number) => x });
    let a = agg.init();
    for (const x of [1, 5]) a = agg.add(a, x);
    let b = agg.init();
    for (const x of [10, 'no']) b = agg.add(b, x);
    expect(agg.result(agg.merge!(a, b))).toEqual({ count: 4, sum: 16, min: 1, max: 10, avg: 16 / 3 });
    expect(agg.result(agg.merge!(agg.init(), agg.init()))).toEqual({ count: 0, sum: 0, min: null, max: null, avg: null });
  });
});
