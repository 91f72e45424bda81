import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queen } from '@queen-mq/client';
import { startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { Stream } from '../stream.js';
import type { SourceMessage } from '../context/source-message.js';
import type { RunnerContext } from '../context/runner-context.js';
import type { CompiledQuery } from '../plan/compile.js';
import { RunnerEmitter } from '../context/events.js';
import { PartitionLocks } from '../context/partition-lock.js';
import { StreamsApi } from '../context/state-api.js';
import { flushRipeRows, prepareWindowBatch } from './window-batch.js';
import { readWindowState, windowCycle, type WindowStateRead } from './window-cycle.js';
import { groupByPartition } from '../runner/pop-loop.js';
import { WATERMARK_KEY, windowStateKey } from '../plan/keys.js';
import { closeHorizonKey } from './close-horizon.js';
import { minuteWindow } from '../../test/minute-window.js';

// The one-read path of a window cycle (one state/get of the whole partition)
// must answer exactly what the two filtered reads answer; a partition with
// many open rows falls back to the filtered reads. Real broker, real state.

const minute = minuteWindow(0);
const sinkPlugin = { kind: 'queue', shape: { queue: 'sink' }, sinkQueue: 'sink', toPushItems: (v: unknown) => [{ queue: 'sink', payload: v }] };
const T0 = Date.parse('2026-01-05T12:00:00.000Z');

let b: TestBroker;
let queen: Queen;

beforeAll(async () => {
  b = await startTestBroker();
  queen = new Queen({ url: b.url });
});
afterAll(async () => {
  await queen?.close();
  await b?.stop();
});

function msg(partitionId: string, offset: number, data: unknown, createdMs: number): SourceMessage {
  return {
    id: `id-${offset}`,
    transactionId: `tx-${offset}`,
    traceId: null,
    data,
    producerSub: null,
    createdAt: new Date(createdMs).toISOString(),
    partitionId,
    partition: 'Default',
    queue: 'src',
    leaseId: 'lease',
    consumerGroup: 'g',
    offset: String(offset),
    retryCount: 0,
  } as SourceMessage;
}

/** A runner context over a freshly registered query, counting state/get requests. */
async function context(plan: CompiledQuery): Promise<{ rt: RunnerContext; reads: () => number }> {
  const api = new StreamsApi(queen);
  const reg = await api.register({ name: uniqueName('wsr'), source_queue: 'src', config_hash: plan.configHash });
  let reads = 0;
  const stateGet = api.stateGet.bind(api);
  api.stateGet = (body) => {
    reads += 1;
    return stateGet(body);
  };
  const rt: RunnerContext = {
    plan,
    queryId: reg.query_id,
    consumerGroup: 'g',
    api,
    locks: new PartitionLocks(),
    events: new RunnerEmitter(),
    metrics: { cyclesTotal: 0, flushCyclesTotal: 0, messagesTotal: 0, lateEventsTotal: 0, errorsTotal: 0, gateAllowsTotal: 0, gateDenialsTotal: 0 },
    touched: new Map(),
    joinHeld: new Map(),
    joinIdleFlushMs: 0,
    report: () => undefined,
    isStopped: () => false,
    signal: new AbortController().signal,
  };
  return { rt, reads: () => reads };
}

/** `count` open windows of keys k0.., one minute each, ending from T0 − 5 min on: the older ones ripe at T0. */
async function seed(rt: RunnerContext, partitionId: string, count: number, watermarkMs?: number): Promise<void> {
  const ops: object[] = [];
  for (let i = 0; i < count; i++) {
    const start = T0 - 6 * 60000 + (i % 10) * 60000;
    ops.push({ type: 'upsert', key: windowStateKey(minute.tag, start, `k${i}`), value: { acc: { count: i, sum: i }, windowStart: start, windowEnd: start + 60000 } });
  }
  // Not window rows of this operator, or without a numeric windowEnd: never ripe.
  ops.push({ type: 'upsert', key: `other\u001f${T0}`, value: { windowEnd: 0 } });
  ops.push({ type: 'upsert', key: `${minute.tag}\u001fodd`, value: { windowEnd: String(T0 - 600000) } });
  if (watermarkMs !== undefined) ops.push({ type: 'upsert', key: WATERMARK_KEY, value: { eventTimeMs: watermarkMs } });
  // The processing-time close horizon (under the window's prefix, no windowEnd: never ripe).
  ops.push({ type: 'upsert', key: closeHorizonKey(minute.tag), value: { closedThroughMs: T0 - 7 * 60000 } });
  for (let i = 0; i < ops.length; i += 100) {
    const res = await rt.api.cycle({ query_id: rt.queryId, partition_id: partitionId, state_ops: ops.slice(i, i + 100) as never, push_items: [], ack: null });
    expect(res.success).toBe(true);
  }
}

function comparable(read: WindowStateRead, touched: readonly string[]) {
  return {
    clock: read.clock,
    stored: touched.map((k) => read.stored.get(k) ?? null).map((r) => r && { key: r.key, value: r.value, version: r.version }),
    ripe: read.ripeRows.map((r) => ({ key: r.key, value: r.value, version: r.version })),
  };
}

const plans = {
  'processing time': () =>
    Stream.from({ name: 'src' })
      .keyBy((m: any) => m.data.k)
      .window(minute, { gracePeriod: 30 })
      .aggregate({ count: () => 1 })
      .to(sinkPlugin)
      .compile(),
  'event time': () =>
    Stream.from({ name: 'src' })
      .keyBy((m: any) => m.data.k)
      .window(minute, { eventTime: (m: any) => m.data.ts, gracePeriod: 30 })
      .aggregate({ count: () => 1 })
      .to(sinkPlugin)
      .compile(),
};

describe('window cycle state read', () => {
  for (const [name, makePlan] of Object.entries(plans)) {
    it(`S10 ${name}: one whole-partition read answers what the filtered reads answer; a large partition is read filtered`, async () => {
      const plan = makePlan();
      const { rt, reads } = await context(plan);
      const small = '00000000-0000-4000-8000-0000000000b1';
      const large = '00000000-0000-4000-8000-0000000000b2';
      await seed(rt, small, 20, T0 - 120000);
      await seed(rt, large, 400, T0 - 120000);
      // A batch touching two stored windows (k3, k7) and a new one; newest createdAt / event time T0 + 61 s.
      const batch = (pid: string) =>
        prepareWindowBatch(plan, [
          msg(pid, 1, { k: 'k3', ts: T0 - 3 * 60000 }, T0 - 3 * 60000),
          msg(pid, 2, { k: 'k7', ts: T0 + 61000 }, T0 + 61000),
          msg(pid, 3, { k: 'new', ts: T0 }, T0),
        ]);

      for (const pid of [small, large]) {
        const prepared = batch(pid);
        const before = reads();
        const first = await readWindowState(rt, pid, prepared, '1'); // nothing learnt yet: whole read
        expect(reads() - before).toBe(1);
        const mid = reads();
        const second = await readWindowState(rt, pid, prepared, '1');
        // The small partition stays on one read; the large one (400 rows) goes back to the two filtered reads.
        expect(reads() - mid).toBe(pid === small ? 1 : 2);
        expect(comparable(second, prepared.touchedKeys)).toEqual(comparable(first, prepared.touchedKeys));

        // What the batch is judged late against is read by both paths: `__wm__`, or the close horizon.
        const judge = name === 'event time' ? WATERMARK_KEY : closeHorizonKey(minute.tag);
        expect(second.stored.get(judge)?.value).toEqual(first.stored.get(judge)?.value);
        expect(first.stored.get(judge)?.value).toEqual(name === 'event time' ? { eventTimeMs: T0 - 120000 } : { closedThroughMs: T0 - 7 * 60000 });
        const c = comparable(first, prepared.touchedKeys);
        expect(c.clock).toBe(T0 + 61000);
        expect(c.stored.map((r) => r?.value.acc.count ?? null)).toEqual([3, 7, null]);
        // Ripe at T0 + 61 s − 30 s grace: windows ending at or before T0 + 31 s, i.e. six starts of the ten, sorted by key.
        const expectedRipe = ((pid === small ? 20 : 400) * 6) / 10;
        expect(c.ripe).toHaveLength(expectedRipe);
        expect(c.ripe.every((r) => r.key.startsWith(`${minute.tag}\u001f`) && r.value.windowEnd <= T0 + 31000)).toBe(true);
        expect([...c.ripe.map((r) => r.key)].sort()).toEqual(c.ripe.map((r) => r.key));
      }
    });
  }
});

/**
 * A processing-time query over a fresh partition holding `count` messages of
 * key a, pushed at once (one createdAt, so one minute), and a cycle that pops
 * two of them and runs one window cycle: its outcome and the state reads it made.
 */
async function carriedSetup(prefix: string, count: number) {
  const plan = plans['processing time']();
  const { rt, reads } = await context(plan);
  (rt as { clock: unknown }).clock = { local: () => Date.now() };
  const partition = uniqueName(prefix);
  await queen.queue('src').partition(partition).push(Array.from({ length: count }, (_, i) => ({ payload: { k: 'a', i } })));
  const cycle = async () => {
    const pop = await queen.queue('src').partition(partition).pop({ batch: 2, consumerGroup: 'g' });
    const [batch] = groupByPartition(pop!);
    const before = reads();
    const outcome = await windowCycle(rt, batch!, { releaseLease: true, effectsDone: new Set() });
    return { outcome, reads: reads() - before, partitionId: batch!.partitionId };
  };
  return { plan, rt, partition, cycle };
}

describe('carried window state', () => {
  it('S10 processing time: the cycle after this runner\'s own skips its state read; a change by another writer meanwhile is caught by the versions', async () => {
    const { rt, partition, cycle } = await carriedSetup('carried', 10);
    const row = async (partitionId: string) => {
      const rows = await rt.api.stateGet({ query_id: rt.queryId, partition_id: partitionId });
      expect(rows).toHaveLength(1);
      return rows[0]!;
    };

    const first = await cycle();
    expect(first).toMatchObject({ outcome: 'committed', reads: 1 });
    expect(await cycle()).toMatchObject({ outcome: 'committed', reads: 0 });
    const after2 = await row(first.partitionId);
    expect(after2.value.acc.count).toBe(4);

    // Another writer changes the row (as another runner of the query could):
    // the next cycle starts from carried rows, conflicts, reads and recomputes.
    const res = await rt.api.cycle({
      query_id: rt.queryId, partition_id: first.partitionId, push_items: [], ack: null,
      state_ops: [{ type: 'upsert', key: after2.key, value: { ...after2.value, acc: { ...after2.value.acc, count: 100 } }, expected_version: after2.version }],
    });
    expect(res.success).toBe(true);
    expect(await cycle()).toMatchObject({ outcome: 'committed', reads: 1 });
    expect((await row(first.partitionId)).value.acc.count).toBe(102);

    // A batch that does not start where this runner's last ack ended (another
    // runner took the messages between) is read, not carried.
    await queen.queue('src').partition(partition).pop({ batch: 2, consumerGroup: 'g', autoAck: true });
    expect(await cycle()).toMatchObject({ outcome: 'committed', reads: 1 });
    expect((await row(first.partitionId)).value.acc.count).toBe(104);
  });

  it('processing time: another runner\'s flush closes the carried window; the next cycle conflicts, reads afresh and judges its values late (never a fresh row)', async () => {
    const { plan, rt, cycle } = await carriedSetup('carried-late', 4);
    const first = await cycle();
    expect(first).toMatchObject({ outcome: 'committed', reads: 1 });
    const rows = await rt.api.stateGet({ query_id: rt.queryId, partition_id: first.partitionId });
    expect(rows).toHaveLength(1);

    // Another runner's idle flush closes the window (and raises the close horizon) behind this runner's carried rows.
    const flush = flushRipeRows(plan, rows, rows[0]!.value.windowEnd);
    expect(flush.stateOps.map((o) => o.type)).toEqual(['delete', 'upsert']);
    expect((await rt.api.cycle({ query_id: rt.queryId, partition_id: first.partitionId, state_ops: flush.stateOps, push_items: [], ack: null })).success).toBe(true);

    // The carried row's version is stale: VERSION_CONFLICT, a fresh read, and the two values are late.
    expect(await cycle()).toMatchObject({ outcome: 'committed', reads: 1 });
    expect(rt.metrics.lateEventsTotal).toBe(2);
    const after = await rt.api.stateGet({ query_id: rt.queryId, partition_id: first.partitionId });
    expect(after.map((r) => r.key)).toEqual([closeHorizonKey(minute.tag)]);
});
});
