import { beforeAll, describe, expect, it } from 'vitest';
import { type TestBroker } from '@queen-mq/testing';
import { type Queen, Stream } from './index.js';
import { collectUntil, configureSource, cursorOf, drain, push, stateRows, useStreamBroker, runDefaults } from '../test/helpers.js';

// A post-window operator that throws on a closed window's value (core's
// emit-dead-letter.ts): that emit is dead-lettered to the query's
// dead-letter queue (streams.<query>.dead-letters) with the error, the query
// and the window bounds, in the same commit that closes the window; every
// other window reaches the sink exactly once and the partition moves on.
// Before, the whole cycle failed on every delivery: no window of the batch
// was ever emitted and the cursor never moved.

const env = useStreamBroker();
const { names, track } = env;
let b: TestBroker;
let queen: Queen;
beforeAll(() => {
  ({ b, queen } = env);
});

const at = (minute: number, second: number) => `2026-01-05T10:${String(minute).padStart(2, '0')}:${String(second).padStart(2, '0')}Z`;

describe('a post-window operator that throws', () => {
  it('dead-letters that window only (error, query, bounds, value); the others reach the sink once, the partition moves on', async () => {
    const { src, sink, queryId } = await names('emit-dl');
    await configureSource(b, src);
    const lines: string[] = [];
    const events: { windowStart: number; windowEnd: number; queue: string; error: string }[] = [];
    const h = track(
      await Stream.from(queen.queue(src))
        .windowTumbling({ seconds: 60, idleFlushMs: 0, eventTime: (m) => m.data.ts })
        .aggregate({ count: () => 1, sum: (m) => m.amount })
        .map((w) => {
          if (w.count === 2) throw new Error('cannot format a window of two');
          return { total: w.sum };
        })
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults, logger: { warn: (line) => lines.push(line) } }),
    );
    h.on('emit:dead-lettered', (e) => events.push({ windowStart: e.windowStart, windowEnd: e.windowEnd, queue: e.queue, error: e.error }));
    const orders = [
      ...[1, 2, 3].map((amount, i) => ({ ts: at(0, i), amount })), // 10:00 window: 3 orders
      ...[10, 20].map((amount, i) => ({ ts: at(1, i), amount })), // 10:01 window: 2 orders (the operator throws)
      ...[100, 200, 300, 400].map((amount, i) => ({ ts: at(2, i), amount })), // 10:02 window: 4 orders
      { ts: at(3, 30), amount: 1000 }, // closes 10:02
    ];
    const [p] = await push(b, src, orders);

    const got = await collectUntil(b, sink, (all) => all.length >= 2, 15000, 800);
    expect(got.map((m) => m.data)).toEqual([{ total: 6 }, { total: 1000 }]);
    const dlq = await drain(b, `streams.${queryId}.dead-letters`);
    expect(dlq).toHaveLength(1);
    const start = Date.parse(at(1, 0));
    expect(dlq[0]!.partition).toBe('Default');
    expect(dlq[0]!.data).toEqual({
      queryId,
      partition: 'Default',
      partitionId: p!.partition_id,
      key: p!.partition_id,
      window: { start, end: start + 60_000 },
      stage: 'map',
      error: '.map() threw: cannot format a window of two',
      value: { count: 2, sum: 30 },
    });
    expect(await cursorOf(b, `streams.${queryId}`, src)).toBe('10');
    // The three closed windows are gone from the state; only 10:03 is open.
    const rows = (await stateRows(b, h.queryUuid, p!.partition_id)).filter((r) => r.key !== '__wm__');
    expect(rows.map((r) => r.value.acc)).toEqual([{ count: 1, sum: 1000 }]);
    expect(h.metrics()).toMatchObject({ emitsDeadLetteredTotal: 1, messagesTotal: 10 });
    expect(events).toEqual([{ windowStart: start, windowEnd: start + 60_000, queue: `streams.${queryId}.dead-letters`, error: dlq[0]!.data.error }]);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`stream query "${queryId}"`);
    expect(lines[0]).toContain('2026-01-05T10:01:00.000Z');
  });

  it('a window closed by the idle flush is dead-lettered the same way, once', async () => {
    const { src, sink, queryId } = await names('emit-dl-flush');
    await configureSource(b, src);
    const h = track(
      await Stream.from(queen.queue(src))
        .windowTumbling({ seconds: 1, idleFlushMs: 100 })
        .aggregate({ count: () => 1 })
        .map(() => {
          throw new Error('always');
        })
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults, logger: { warn: () => undefined } }),
    );
    await push(b, src, [{ n: 1 }, { n: 2 }]);
    const dlq = await collectUntil(b, `streams.${queryId}.dead-letters`, (all) => all.length >= 1, 15000, 1500);
    expect(dlq).toHaveLength(1);
    expect(dlq[0]!.data).toMatchObject({ queryId, stage: 'map', error: '.map() threw: always', value: { count: 2 } });
    expect(dlq[0]!.data.window.end - dlq[0]!.data.window.start).toBe(1000);
    expect(h.metrics().emitsDeadLetteredTotal).toBe(1);
    expect(h.metrics().flushCyclesTotal).toBeGreaterThanOrEqual(1);
    expect(await drain(b, sink)).toEqual([]);
  });
});
