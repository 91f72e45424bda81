import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBroker, testStream, uniqueName, type TestBroker } from '@queen-mq/testing';
import type { LateRecord, WindowPlugin } from '@queen-mq/core';
import { Stream, queueSink } from './index.js';
import { withBounds } from '../test/helpers.js';

// onLate: a queue (or any sink plugin). Every late value reaches that queue
// as a late record, pushed in the cycle that judged it late, for every window
// plugin — the routing lives in core's window cycle, not in the plugins.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker({ virtualClock: '2026-01-05T10:00:00.000Z' });
});
afterAll(async () => b?.stop());

const T = Date.parse('2026-01-05T10:00:00.000Z');
const UUID = expect.stringMatching(/^[0-9a-f-]{36}$/);

/** Everything on `queue` so far (auto-acked, so each call answers what is new). */
async function drain(queue: string): Promise<{ data: LateRecord; partition: string; transactionId: string }[]> {
  const got = [];
  for (;;) {
    const res = await b.http('GET', `/api/v1/pop/queue/${encodeURIComponent(queue)}?batch=1000&autoAck=true`);
    if (res.status === 204 || res.status === 404) return got;
    expect(res.status).toBe(200);
    got.push(...res.body.messages);
  }
}

describe('onLate: a queue', () => {
  it('tumbling: each late value reaches the late queue once, with its window, watermark and lateness; on-time values fold as before', async () => {
    const src = uniqueName('late-src');
    const late = uniqueName('late-orders');
    const t = await testStream(
      Stream.from<{ k: string; ts: number; n: number }>({ name: src })
        .keyBy((m) => m.data.k)
        .windowTumbling({ seconds: 60, eventTime: (m) => m.data.ts, onLate: { name: late } })
        .aggregate({ count: () => 1, sum: (m) => m.n })
        .map(withBounds)
        .to({ name: `${src}.out` }),
      { broker: b },
    );
    try {
      // 10:01:05 moves the watermark past [10:00, 10:01): a's first minute closes.
      expect((await t.push([{ k: 'a', ts: T + 10_000, n: 1 }, { k: 'a', ts: T + 65_000, n: 2 }])).map((e) => e.data)).toEqual([
        { count: 1, sum: 1, start: '2026-01-05T10:00:00.000Z', end: '2026-01-05T10:01:00.000Z' },
      ]);
      expect(await drain(late)).toEqual([]);
      // Late for the closed minute: not folded, no emit, one late record.
      expect(await t.push([{ k: 'a', ts: T + 30_000, n: 3 }])).toEqual([]);
      // b's value for that minute is late too (b never had a row: the watermark is the partition's); a's 10:01:10 is on time.
      expect(await t.push([{ k: 'b', ts: T + 59_999, n: 4 }, { k: 'a', ts: T + 70_000, n: 5 }])).toEqual([]);

      const records = await drain(late);
      const base = { queryId: t.queryId, partition: 'Default', partitionId: UUID, window: { start: T, end: T + 60_000 }, watermarkMs: T + 65_000, latenessMs: 5_000 };
      expect(records.map((r) => r.data)).toEqual([
        { ...base, offset: '3', key: 'a', eventTimeMs: T + 30_000, value: { k: 'a', ts: T + 30_000, n: 3 } },
        { ...base, offset: '4', key: 'b', eventTimeMs: T + 59_999, value: { k: 'b', ts: T + 59_999, n: 4 } },
      ]);
      // The late queue's partition is the source partition's (the queue sink's default); ids are the deterministic sink ids.
      expect(records.map((r) => r.partition)).toEqual(['Default', 'Default']);
      expect(new Set(records.map((r) => r.transactionId)).size).toBe(2);
      for (const r of records) expect(r.transactionId).toMatch(/^sx-[0-9a-f]{40}$/);

      // What stayed open: a's 10:01 minute with n 2 and 5, and the watermark at 10:01:10.
      const rows = await t.state({ bookkeeping: true });
      expect(rows.map((r) => [r.key.split('\u001f')[1] ?? r.key, r.value.acc ?? r.value])).toEqual([
        ['__wm__', { eventTimeMs: T + 70_000 }],
        ['2026-01-05T10:01:00.000Z', { count: 2, sum: 7 }],
      ]);
      expect(t.metrics().lateEventsTotal).toBe(2);
      // The runner sends its late count with the cycle that judged them: the broker's history has them too.
      await b.ctx.metrics.history.flush();
      const history = await b.sql.query(`select coalesce(sum(h.late), 0)::int as late, coalesce(sum(h.messages_in), 0)::int as n
           from queen.stream_history h join queen_streams.queries q on q.query_id = h.query_id where q.name = $1 and h.step = 60`,
        [t.queryId],);
      expect(history.rows).toEqual([{ late: 2, n: 5 }]);
      expect(t.errors).toEqual([]);
    } finally {
      await t.stop();
    }
  });

  // One late value per window kind: [chain options, the on-time event, the late event, the windows it missed (lateness)].
  const fixed90: WindowPlugin = {
    kind: 'every-90s',
    shape: { seconds: 90 },
    defaultIdleFlushMs: 0,
    assign: (ts) => {
      const start = Math.floor(ts / 90_000) * 90_000;
      return [{ start, end: start + 90_000 }];
    },
  };
  const cases: { name: string; build: (s: Stream<any>, lateQueue: string) => Stream<any>; ahead: number; lateAt: number; missed: { start: number; end: number; wm: number }[] }[] = [
    {
      // Late for [10:00, 10:02) only: folded into [10:01, 10:03), which is still open.
      name: 'sliding (partly late: a record for the closed window only)',
      build: (s, q) => s.windowSliding({ size: 120, slide: 60, eventTime: (m: any) => m.data.ts, onLate: { name: q } }),
      ahead: T + 130_000,
      lateAt: T + 61_000,
      missed: [{ start: T, end: T + 120_000, wm: T + 130_000 }],
    },
    {
      // Its own session [10:00:50, 10:01:00] joins no open one and ended before the watermark (10:01:40).
      name: 'session',
      build: (s, q) => s.windowSession({ gap: 10, eventTime: (m: any) => m.data.ts, onLate: { name: q } }),
      ahead: T + 100_000,
      lateAt: T + 50_000,
      missed: [{ start: T + 50_000, end: T + 60_000, wm: T + 100_000 }],
    },
    {
      name: 'cron expression in a time zone',
      build: (s, q) => s.windowCron({ expression: '*/5 * * * *', timeZone: 'Europe/Berlin', eventTime: (m: any) => m.data.ts, onLate: { name: q } }),
      ahead: T + 360_000,
      lateAt: T + 60_000,
      missed: [{ start: T, end: T + 300_000, wm: T + 360_000 }],
    },
    {
      name: 'cron unit',
      build: (s, q) => s.windowCron({ every: 'minute', eventTime: (m: any) => m.data.ts, onLate: { name: q } }),
      ahead: T + 90_000,
      lateAt: T + 1_000,
      missed: [{ start: T, end: T + 60_000, wm: T + 90_000 }],
    },
    {
      // A custom plugin through the generic .window(), with any sink plugin as onLate.
      name: 'a custom window plugin with a sink plugin',
      build: (s, q) => s.window(fixed90, { eventTime: (m: any) => m.data.ts, onLate: queueSink(q) }),
      ahead: T + 200_000,
      lateAt: T + 10_000,
      missed: [{ start: T, end: T + 90_000, wm: T + 200_000 }],
    },
  ];
  for (const c of cases) {
    it(`${c.name}: the late value reaches the late queue with its missed window`, async () => {
      const src = uniqueName('late-kind');
      const late = uniqueName('late-kind-q');
      const chain = c
        .build(Stream.from({ name: src }), late)
        .aggregate({ count: () => 1 })
        .to({ name: `${src}.out` });
      const t = await testStream(chain, { broker: b });
      try {
        await t.push([{ ts: c.ahead }]);
        await t.push([{ ts: c.lateAt }]);
        const records = (await drain(late)).map((r) => r.data);
        expect(records).toEqual(
          c.missed.map((w) => ({
            queryId: t.queryId,
            partition: 'Default',
            partitionId: UUID,
            offset: '2',
            key: records[0]?.partitionId,
            eventTimeMs: c.lateAt,
            window: { start: w.start, end: w.end },
            watermarkMs: w.wm,
            latenessMs: w.wm - w.end,
            value: { ts: c.lateAt },
          })),
        );
        expect(records[0]!.key).toBe(records[0]!.partitionId); // no keyBy: the key is the source partition id
        expect(t.metrics().lateEventsTotal).toBe(1);
        expect(t.errors).toEqual([]);
      } finally {
        await t.stop();
      }
    });
  }

  it('options: a late queue is part of the config hash (drop and include keep theirs); a bad onLate names the accepted forms', () => {
    const chain = (onLate?: any) => Stream.from({ name: 'src' }).windowTumbling({ seconds: 60, eventTime: (m) => m.data.ts, ...(onLate ? { onLate } : {}) }).aggregate({ count: () => 1 }).to({ name: 'out' });
    const hash = (onLate?: any) => chain(onLate).compile().configHash;
    expect(hash('drop')).toBe(hash());
    expect(hash({ name: 'late-a' })).toBe(hash(queueSink('late-a')));
    expect(new Set([hash('drop'), hash('include'), hash({ name: 'late-a' }), hash({ name: 'late-b' })]).size).toBe(4);
    const structure = chain({ name: 'late-a' }).compile().structure as any[];
    expect(structure[0]).toMatchObject({ op: 'window', onLate: { sink: 'queue', shape: { queue: 'late-a' } } });
    expect(() => chain('sideOutput')).toThrow(/onLate must be "drop", "include" or a sink plugin/);
    expect(() => chain({ kind: 'queue' })).toThrow(/^tumbling window: onLate must be "drop", "include" or a sink plugin .*, got {"kind":"queue"}$/);
  });
});
