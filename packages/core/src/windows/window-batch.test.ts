import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { Stream } from '../stream.js';
import type { SourceMessage } from '../context/source-message.js';
import type { StateRow } from '../context/wire.js';
import { batchClock, foldWindowBatch, flushRipeRows, prepareWindowBatch } from './window-batch.js';
import { evaluateGateBatch, prepareGateBatch } from '../gate/gate-batch.js';
import { escapeKeyPart, unescapeKeyPart, userKeyOfWindowKey, windowStateKey } from '../plan/keys.js';
import { sinkTransactionId } from '../commit/transaction-id.js';
import { toEpochMs } from '../plan/event-time.js';
import { WindowPlacementError } from './window-placement.js';
import { poisonIndex, poisonPhase } from '../runner/poison.js';
import { minuteWindow } from '../../test/minute-window.js';

const minute = minuteWindow(5000);
const sinkPlugin = { kind: 'queue', shape: { queue: 'sink' }, sinkQueue: 'sink', toPushItems: (v: unknown) => [{ queue: 'sink', payload: v }] };
const PID = '0195f0a0-0000-7000-8000-000000000001';
const ms = (iso: string) => Date.parse(iso);

function msg(offset: number, data: unknown, createdAt = '2026-01-05T12:00:00.000000Z'): SourceMessage {
  return {
    id: `id-${offset}`,
    transactionId: `tx-${offset}`,
    traceId: null,
    data,
    producerSub: null,
    createdAt,
    partitionId: PID,
    partition: 'Default',
    queue: 'src',
    leaseId: 'lease',
    consumerGroup: 'g',
    offset: String(offset),
    retryCount: 0,
  };
}

const eventPlan = (opts: object = {}) =>
  Stream.from({ name: 'src' })
    .window(minute, { eventTime: (m: any) => m.data.ts, ...opts })
    .aggregate({ count: () => 1, sum: (m: any) => m.v })
    .to(sinkPlugin)
    .compile();

function rows(list: StateRow[]): Map<string, StateRow> {
  return new Map(list.map((r) => [r.key, r]));
}

describe('window fold (pure)', () => {
  it('S10 one batch across a boundary: the closed window emits, the next stays a row', () => {
    const plan = eventPlan();
    const batch = [msg(1, { ts: '2026-01-05T10:00:00.000Z' }), msg(2, { ts: '2026-01-05T10:00:59.999Z' }), msg(3, { ts: '2026-01-05T10:01:00.000Z' })];
    const prepared = prepareWindowBatch(plan, batch);
    const stored = rows([]);
    const clock = batchClock(plan, prepared, stored);
    expect(clock).toBe(ms('2026-01-05T10:01:00.000Z'));
    const fold = foldWindowBatch(plan, prepared, stored, [], clock);
    expect(fold.emits).toHaveLength(1);
    expect(fold.emits[0]).toMatchObject({
      windowKey: `tumb:60\u001f2026-01-05T10:00:00.000Z\u001f${PID}`,
      windowStart: ms('2026-01-05T10:00:00.000Z'),
      windowEnd: ms('2026-01-05T10:01:00.000Z'),
      value: { count: 2, sum: 0 },
    });
    expect(fold.stateOps).toEqual([
      {
        type: 'upsert',
        key: `tumb:60\u001f2026-01-05T10:01:00.000Z\u001f${PID}`,
        value: { acc: { count: 1, sum: 0 }, windowStart: ms('2026-01-05T10:01:00.000Z'), windowEnd: ms('2026-01-05T10:02:00.000Z') },
        expected_version: 0,
      },
      { type: 'upsert', key: '__wm__', value: { eventTimeMs: ms('2026-01-05T10:01:00.000Z') }, expected_version: 0 },
    ]);
  });

  it('stored rows carry their version; a closing row is deleted with it, untouched ripe rows close too', () => {
    const plan = eventPlan({ gracePeriod: 10 });
    const k0959 = windowStateKey('tumb:60', ms('2026-01-05T09:59:00Z'), PID);
    const k1000 = windowStateKey('tumb:60', ms('2026-01-05T10:00:00Z'), PID);
    const stored = rows([
      { key: '__wm__', value: { eventTimeMs: ms('2026-01-05T10:00:30Z') }, version: 7 },
      { key: k1000, value: { acc: { count: 4, sum: 40 }, windowStart: ms('2026-01-05T10:00:00Z'), windowEnd: ms('2026-01-05T10:01:00Z') }, version: 9 },
    ]);
    const ripe: StateRow[] = [{ key: k0959, value: { acc: { count: 1, sum: 1 }, windowStart: ms('2026-01-05T09:59:00Z'), windowEnd: ms('2026-01-05T10:00:00Z') }, version: 3 }];
    const prepared = prepareWindowBatch(plan, [msg(5, { ts: '2026-01-05T10:00:40Z', v: 2 }), msg(6, { ts: '2026-01-05T10:01:10Z', v: 1 })]);
    const clock = batchClock(plan, prepared, stored)!;
    expect(clock).toBe(ms('2026-01-05T10:01:10Z'));
    const fold = foldWindowBatch(plan, prepared, stored, ripe, clock);
    expect(fold.emits.map((e) => [e.windowKey, e.value])).toEqual([
      [k0959, { count: 1, sum: 1 }],
      [k1000, { count: 5, sum: 42 }],
    ]);
    expect(fold.stateOps).toContainEqual({ type: 'delete', key: k1000, expected_version: 9 });
    expect(fold.stateOps).toContainEqual({ type: 'delete', key: k0959, expected_version: 3 });
    expect(fold.stateOps).toContainEqual({ type: 'upsert', key: '__wm__', value: { eventTimeMs: clock }, expected_version: 7 });
  });

  it('S24/S26 late events: dropped and counted, or re-emitted with the late identity', () => {
    const stored = rows([{ key: '__wm__', value: { eventTimeMs: ms('2026-01-05T10:59:30Z') }, version: 2 }]);
    const batch = [msg(12, { ts: '2026-01-05T05:00:00Z', v: 999 })];
    const dropPlan = eventPlan({ allowedLateness: 30 });
    const dropped = foldWindowBatch(dropPlan, prepareWindowBatch(dropPlan, batch), stored, [], ms('2026-01-05T10:59:30Z'));
    expect(dropped.lateDropped).toBe(1);
    expect(dropped.emits).toEqual([]);
    expect(dropped.stateOps).toEqual([]);
    const incPlan = eventPlan({ allowedLateness: 30, onLate: 'include' });
    const inc = foldWindowBatch(incPlan, prepareWindowBatch(incPlan, batch), stored, [], ms('2026-01-05T10:59:30Z'));
    expect(inc.lateDropped).toBe(0);
    const key = windowStateKey('tumb:60', ms('2026-01-05T05:00:00Z'), PID);
    expect(inc.emits).toEqual([
      expect.objectContaining({ identity: `${key}\u001flate\u001f12`, value: { count: 1, sum: 999 } }),
    ]);
    expect(inc.stateOps).toEqual([]);
  });

  it('S23 extractor types agree; a message with no usable event time cannot be placed (issue 28 item 5)', () => {
    const at = '2026-01-05T10:00:10.000Z';
    expect(toEpochMs(new Date(at))).toBe(ms(at));
    expect(toEpochMs(ms(at))).toBe(ms(at));
    expect(toEpochMs(at)).toBe(ms(at));
    for (const bad of [null, undefined, 'not-a-date', Number.NaN, {}, '']) expect(toEpochMs(bad)).toBeUndefined();
    const plan = eventPlan();
    expect(prepareWindowBatch(plan, [msg(1, { ts: at }), msg(2, { ts: at })]).entries).toHaveLength(2);
    // The first message that cannot be placed names itself: the runner makes it poison (poison.ts).
    for (const [data, text] of [
      [{ ts: null }, 'eventTime returned null for the message at offset 2'],
      [{ ts: 'not-a-date' }, 'eventTime returned "not-a-date" for the message at offset 2'],
      [{}, 'eventTime returned undefined for the message at offset 2'],
    ] as const) {
      const placing = () => prepareWindowBatch(plan, [msg(1, { ts: at }), msg(2, data), msg(3, { ts: null })]);
      expect(placing).toThrow(WindowPlacementError);
      expect(placing).toThrow(text);
      try {
        placing();
      } catch (err) {
        expect(poisonIndex(err, [msg(1, {}), msg(2, {}), msg(3, {})])).toBe(1);
        expect(poisonPhase(err)).toBe('window-apply');
      }
    }
    const throwing = Stream.from({ name: 'src' })
      .window(minute, { eventTime: () => { throw new Error('corrupt'); } })
      .aggregate({ count: () => 1 })
      .to(sinkPlugin)
      .compile();
    expect(() => prepareWindowBatch(throwing, [msg(7, {})])).toThrow('eventTime threw on the message at offset 7: corrupt');
    const noWindow = Stream.from({ name: 'src' })
      .window({ ...minute, assign: () => { throw new Error('no window'); } })
      .aggregate({ count: () => 1 })
      .to(sinkPlugin)
      .compile();
    expect(() => prepareWindowBatch(noWindow, [msg(8, {})])).toThrow('window "test-tumbling" assign threw on the message at offset 8: no window');
  });

  it('processing time buckets on createdAt and the clock is the newest createdAt', () => {
    const plan = Stream.from({ name: 'src' }).window(minute).aggregate({ count: () => 1 }).to(sinkPlugin).compile();
    const prepared = prepareWindowBatch(plan, [msg(1, {}, '2026-01-05T10:00:59.999999Z'), msg(2, {}, '2026-01-05T10:01:00.000001Z')]);
    expect(batchClock(plan, prepared, rows([]))).toBe(ms('2026-01-05T10:01:00.000Z'));
    const fold = foldWindowBatch(plan, prepared, rows([]), [], batchClock(plan, prepared, rows([])));
    expect(fold.emits.map((e) => e.value)).toEqual([{ count: 1 }]);
    // The open minute, and the close horizon: [10:00, 10:01) was emitted at 10:01.
    expect(fold.stateOps.map((o) => [o.type, o.key.split('\u001f')[1]])).toEqual([
      ['upsert', '2026-01-05T10:01:00.000Z'],
      ['upsert', '__closed__'],
    ]);
  });

  it('idle flush turns ripe rows into deletes at their versions', () => {
    const plan = eventPlan();
    const k = windowStateKey('tumb:60', 0, 'a%b\u001fc');
    const flush = flushRipeRows(plan, [{ key: k, value: { acc: { count: 2, sum: 3 }, windowStart: 0, windowEnd: 60000 }, version: 11 }], 60000);
    expect(flush.stateOps).toEqual([{ type: 'delete', key: k, expected_version: 11 }]);
    expect(flush.emits[0]).toMatchObject({ userKey: 'a%b\u001fc', value: { count: 2, sum: 3 } });
  });
});

describe('keys and ids', () => {
  it('escapes % and U+001F in user keys, reversibly', () => {
    expect(escapeKeyPart('a%b\u001fc')).toBe('a%25b%1Fc');
    expect(unescapeKeyPart(escapeKeyPart('a%1Fb%25\u001f'))).toBe('a%1Fb%25\u001f');
    expect(userKeyOfWindowKey(windowStateKey('tumb:7', 7000, 'x\u001fy'))).toBe('x\u001fy');
    expect(windowStateKey('tumb:7', 7000, 'k')).toBe('tumb:7\u001f1970-01-01T00:00:07.000Z\u001fk');
  });

  it('S31 sink transactionId formula', () => {
    const q = '0195f0a0-0000-7000-8000-0000000000aa';
    const identity = `tumb:60\u001f2026-01-05T10:00:00.000Z\u001f${PID}`;
    const expected = 'sx-' + createHash('sha256').update(`${q}\u001f${PID}\u001f${identity}\u001f0`).digest('hex').slice(0, 40);
    expect(sinkTransactionId(q, PID, identity, 0)).toBe(expected);
    expect(sinkTransactionId(q, PID, identity, 1)).not.toBe(expected);
  });
});

describe('gate evaluation (pure)', () => {
  it('S44 a deny discards its own mutation and stops the batch', async () => {
    const plan = Stream.from({ name: 'src' })
      .pipe({
        kind: 'gate',
        evaluate: (m: any, ctx) => {
          ctx.state.seen = (ctx.state.seen ?? 0) + 1;
          return m.data.n <= 2;
        },
      })
      .to(sinkPlugin)
      .compile();
    const batch = [1, 2, 3, 4, 5].map((n) => msg(n, { n }));
    const r = await evaluateGateBatch(plan, prepareGateBatch(plan, batch), new Map());
    expect(r).toMatchObject({ allowedMessages: 2, allows: 2, denied: true });
    expect(r.stateOps).toEqual([{ type: 'upsert', key: PID, value: { seen: 2 }, expected_version: 0 }]);
    expect(r.outputs.map((o) => o.identity)).toEqual(['msg\u001f1', 'msg\u001f2']);
  });

  it('S47 a gate answering "yes" is an error, not a decision', async () => {
    const plan = Stream.from({ name: 'src' }).pipe({ kind: 'gate', evaluate: () => 'yes' as any }).to(sinkPlugin).compile();
    await expect(evaluateGateBatch(plan, prepareGateBatch(plan, [msg(1, {})]), new Map())).rejects.toThrow(/expected a boolean/);
  });
});
