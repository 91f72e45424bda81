import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { sleep, type TestBroker } from '@queen-mq/testing';
import { type Queen, Stream } from './index.js';
import { collectUntil, push, useStreamBroker } from '../test/helpers.js';

// Issue 13 item 6: processing-time windows are assigned by createdAt, which
// PostgreSQL stamps, and must be closed on that same clock. The runner's
// process clock is shifted here (Date.now, which the runner's clock seam
// reads by default; the in-process broker stamps nothing with it), as on a
// machine whose clock is 30 s off. Ahead, the idle flush used to close the
// open window at once and the rest of its messages were dropped as duplicate
// emits; behind, the last window waited 30 s for its flush.

const env = useStreamBroker();
const { names, track } = env;
let b: TestBroker;
let queen: Queen;
beforeAll(() => {
  ({ b, queen } = env);
});
afterEach(() => {
  vi.restoreAllMocks();
});

const WINDOW_S = 2;

/** Per window start (epoch ms): how many source messages PostgreSQL stamped into it. */
async function expectedWindows(queue: string): Promise<[number, number][]> {
  const { rows } = await b.sql.query<{ start: string; n: number }>(
    `select (floor(extract(epoch from m.created_at) * 1000 / $2) * $2)::bigint::text as start, count(*)::int as n
       from queen.messages m join queen.partitions p on p.id = m.partition_id
      where p.queue_name = $1 group by 1 order by 1`,
    [queue, WINDOW_S * 1000],
  );
  return rows.map((r) => [Number(r.start), r.n]);
}

async function runShifted(shiftMs: number) {
  const { src, sink, queryId } = await names(`clock${shiftMs > 0 ? 'ahead' : 'behind'}`);
  const realNow = Date.now;
  vi.spyOn(Date, 'now').mockImplementation(() => realNow.call(Date) + shiftMs);
  const h = track(
    await Stream.from(queen.queue(src))
      .windowTumbling({ seconds: WINDOW_S, idleFlushMs: 100 })
      .aggregate({ count: () => 1 })
      .map((v: any, ctx) => ({ start: ctx.windowStart, count: v.count }))
      .to(queen.queue(sink))
      .run({ queryId, url: b.url, batchSize: 50, maxWaitMillis: 200 }),
  );
  // 24 messages, one every 150 ms: two or three windows, each fed across many cycles and flush ticks.
  for (let i = 0; i < 24; i++) {
    await push(b, src, [{ i }]);
    await sleep(150);
  }
  const expected = await expectedWindows(src);
  // Every window is closed by the flush within a few seconds of its end on the broker's clock.
  const got = await collectUntil(b, sink, (all) => all.length >= expected.length, 8000, 1000);
  const windows = got.map((m) => [m.data.start, m.data.count] as [number, number]).sort((x, y) => x[0] - y[0]);
  return { windows, expected, h };
}

describe('one clock for processing time', () => {
  it('I13.6 a runner whose clock is 30 s ahead of the database: every window emitted once with its exact count (Σ = 24)', async () => {
    const { windows, expected, h } = await runShifted(30_000);
    expect(windows).toEqual(expected);
    expect(windows.reduce((s, [, n]) => s + n, 0)).toBe(24);
    expect(h.metrics().errorsTotal).toBe(0);
  });

  it('I13.6 a runner whose clock is 30 s behind the database: the last window still closes on time, exact counts (Σ = 24)', async () => {
    const { windows, expected } = await runShifted(-30_000);
    expect(windows).toEqual(expected);
    expect(windows.reduce((s, [, n]) => s + n, 0)).toBe(24);
  });

  it('I13.6 a gate sees the broker\'s clock as ctx.streamTimeMs, not a runner clock an hour ahead', async () => {
    const { src, sink, queryId } = await names('clockgate');
    const realNow = Date.now;
    vi.spyOn(Date, 'now').mockImplementation(() => realNow.call(Date) + 3_600_000);
    const seen: number[] = [];
    track(
      await Stream.from(queen.queue(src))
        .gate((_m, ctx) => {
          seen.push(ctx.streamTimeMs);
          return true;
        })
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, batchSize: 50, maxWaitMillis: 200 }),
    );
    await push(b, src, [{ n: 1 }, { n: 2 }]);
    await collectUntil(b, sink, (all) => all.length >= 2, 8000);
    const { rows } = await b.sql.query<{ created: string; now: string }>(
      `select (extract(epoch from max(m.created_at)) * 1000)::bigint::text as created, (extract(epoch from now()) * 1000)::bigint::text as now
         from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1`,
      [src],
    );
    // Between the messages' createdAt and the database's now, never an hour off.
    expect(seen).toHaveLength(2);
    for (const t of seen) {
      expect(t).toBeGreaterThanOrEqual(Number(rows[0]!.created));
      expect(t).toBeLessThanOrEqual(Number(rows[0]!.now));
    }
  });
});
