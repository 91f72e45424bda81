import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { Stream } from '../stream.js';
import type { SinkPlugin } from '../plan/plugins.js';
import { minuteWindow } from '../../test/minute-window.js';

// One runner over a source queue by wildcard: flooded partitions must not
// hold back a quiet partition's window. The broker serves the source's
// pending partitions in turn (claimOrder 'fair', its default), so the quiet
// partition's closing message is processed after a few batches of the
// flood, not after the flood; with claimOrder 'oldest' it waits for the
// whole flood (the case that shows this test can fail: the runner's pops in
// flight each hold a flooded partition, the oldest pending messages). Counted in flood
// messages processed before the quiet partition's window closed.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => {
  await b?.stop();
});

/** Flooded partitions (as many as the runner's pops in flight, so each holds one) and messages in each. */
const FLOODED = 4;
const EACH = 300;
const FLOOD = FLOODED * EACH;
const T0 = Date.parse('2026-01-05T12:00:00.000Z');

function queueSink(queue: string): SinkPlugin {
  return { kind: 'queue', shape: { queue }, sinkQueue: queue, toPushItems: (v: unknown) => [{ queue, payload: v }] } as SinkPlugin;
}

/** Flood messages the runner had keyed when the quiet partition was pushed and when it keyed the quiet partition's closing message, and the quiet window's result. */
async function floodBeforeQuietCloses(claimOrder: 'fair' | 'oldest') {
  const src = uniqueName('fair-src');
  const sink = uniqueName('fair-sink');
  expect((await b.http('POST', '/api/v1/configure', { queue: src, options: { leaseTime: 60, claimOrder } })).status).toBe(200);
  // The flood: 100 ms of event time apart in each partition, 600 to a window.
  for (let p = 0; p < FLOODED; p++) {
    const items = Array.from({ length: EACH }, (_, j) => ({ queue: src, partition: `flood-${p}`, payload: { k: 'flood', ts: T0 + j * 100 } }));
    expect((await b.http('POST', '/api/v1/push', { items })).status).toBe(201);
  }
  let flood = 0;
  let atClose: number | null = null;
  const errors: string[] = [];
  const handle = await Stream.from({ name: src })
    .keyBy((m: any) => {
      if (m.data.k === 'flood') flood++;
      else if (m.data.ts === T0 + 120_000 && atClose === null) atClose = flood;
      return m.data.k;
    })
    .window(minuteWindow(0), { eventTime: (m: any) => m.data.ts, gracePeriod: 0 })
    .aggregate({ count: () => 1 })
    .to(queueSink(sink))
    .run({ queryId: uniqueName('fair'), url: b.url, batchSize: 10, maxPartitions: 1, maxWaitMillis: 100, onError: (e, i) => errors.push(`${i.phase}: ${e.message}`) });
  let result: unknown[] = [];
  let atPush = 0;
  try {
    // The runner is busy with the flood when the quiet partition gets two
    // events in its first minute, then one two minutes on that closes it.
    await eventually(async () => flood >= 30, 60_000);
    const quiet = [T0 + 1_000, T0 + 2_000, T0 + 120_000].map((ts) => ({ queue: src, partition: 'quiet', payload: { k: 'quiet', ts } }));
    expect((await b.http('POST', '/api/v1/push', { items: quiet })).status).toBe(201);
    // Counted from when the push has committed: the flood the runner keys
    // while the push's round trip is under way (a busy CI machine makes it
    // long) is no pop's choice.
    atPush = flood;
    await eventually(async () => {
      const { rows } = await b.sql.query(
        // The sink's partitions are the source's.
        `select m.payload from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1 and p.name = 'quiet'`,
        [sink],
      );
      result = rows.map((r) => r.payload);
      return result.length > 0;
    }, 90_000);
  } finally {
    await handle.stop();
  }
  expect(errors).toEqual([]);
  return { atClose: atClose as number | null, atPush, result };
}

describe('a stream over flooded partitions and a quiet one (one runner)', () => {
  it("closes the quiet partition's window after a few batches of the flood, not after the flood (claimOrder fair)", async () => {
    const { atClose, atPush, result } = await floodBeforeQuietCloses('fair');
    if (process.env.FAIR_NUMBERS) console.log('fair', atPush, atClose);
    expect(result).toHaveLength(1);
    expect(result[0]).toEqual({ count: 2 });
    // Flood messages keyed between the quiet push's commit and its closing
    // message, at most: the 4 popped batches of 10 being processed, the pop
    // in flight, and one turn of each flooded partition before the quiet
    // one's (90), far below the flood's 1,200.
    expect(atClose).not.toBeNull();
    expect(atClose! - atPush).toBeLessThanOrEqual(100);
  }, 120_000);

  it("with claimOrder 'oldest' the quiet window waits until a flooded partition drains", async () => {
    const { atClose, atPush } = await floodBeforeQuietCloses('oldest');
    if (process.env.FAIR_NUMBERS) console.log('oldest', atPush, atClose);
    // A pop in flight is free for the quiet partition only once a flooded partition has drained.
    expect(atClose! - atPush).toBeGreaterThanOrEqual(FLOOD / 2);
  }, 120_000);
});
