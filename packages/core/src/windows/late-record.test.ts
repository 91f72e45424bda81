import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queen } from '@queen-mq/client';
import { startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { Stream } from '../stream.js';
import type { LateRecord, SinkPlugin } from '../plan/plugins.js';
import type { RunnerContext, ErrorInfo } from '../context/runner-context.js';
import type { CompiledQuery } from '../plan/compile.js';
import type { CycleRequest } from '../context/wire.js';
import { BrokerClock } from '../context/broker-clock.js';
import { RunnerEmitter } from '../context/events.js';
import { PartitionLocks } from '../context/partition-lock.js';
import { StreamsApi } from '../context/state-api.js';
import { groupByPartition } from '../runner/pop-loop.js';
import { processPartitionBatch } from '../runner/cycle.js';
import { WATERMARK_KEY } from '../plan/keys.js';
import { minuteWindow } from '../../test/minute-window.js';

// Late records are outputs of the cycle like window emits: exactly once under
// a recompute after VERSION_CONFLICT, a runner that dies before its cycle
// reaches the broker (the batch comes back and is recomputed), and a cycle
// whose answer is lost after it committed. Real broker on a virtual clock.

const minute = minuteWindow(0);
const queueOf = (queue: string): SinkPlugin => ({ kind: 'queue', shape: { queue }, sinkQueue: queue, toPushItems: (v, ctx) => [{ queue, partition: ctx.partition, payload: v }] });
const T = Date.parse('2026-01-05T10:00:00.000Z');
const LEASE_S = 30;

let b: TestBroker;
let queen: Queen;
beforeAll(async () => {
  b = await startTestBroker({ virtualClock: '2026-01-05T10:00:00.000Z' });
  queen = new Queen({ url: b.url });
});
afterAll(async () => {
  await queen?.close();
  await b?.stop();
});

function context(plan: CompiledQuery, queryId: string, queryName: string, api: StreamsApi): RunnerContext & { errors: { err: unknown; info: ErrorInfo }[] } {
  const errors: { err: unknown; info: ErrorInfo }[] = [];
  return {
    plan,
    queryId,
    queryName,
    consumerGroup: `streams.${queryName}`,
    api,
    locks: new PartitionLocks(),
    events: new RunnerEmitter(),
    metrics: { cyclesTotal: 0, flushCyclesTotal: 0, messagesTotal: 0, lateEventsTotal: 0, errorsTotal: 0, gateAllowsTotal: 0, gateDenialsTotal: 0, poisonRetriesTotal: 0, messagesDeadLetteredTotal: 0 },
    touched: new Map(),
    joinHeld: new Map(),
    joinIdleFlushMs: 0,
    clock: new BrokerClock(() => b.clock!.now()),
    logger: console,
    report: (err, info) => void errors.push({ err, info }),
    isStopped: () => false,
    signal: new AbortController().signal,
    errors,
  };
}

/** A registered query with its late queue; the partition's watermark already at 10:01:05 (one on-time cycle). */
async function setup() {
  const src = uniqueName('lr-src');
  const late = uniqueName('lr-late');
  expect((await b.http('POST', '/api/v1/configure', { queue: src, options: { leaseTime: LEASE_S, retryLimit: 100 } })).status).toBe(200);
  const plan = Stream.from({ name: src })
    .keyBy((m: any) => m.data.k)
    .window(minute, { eventTime: (m: any) => m.data.ts, onLate: queueOf(late) })
    .aggregate({ count: () => 1 })
    .to(queueOf(`${src}.out`))
    .compile();
  const queryName = uniqueName('lr');
  const reg = await new StreamsApi(queen).register({ name: queryName, source_queue: src, sink_queue: `${src}.out`, config_hash: plan.configHash });
  const runner = (api = new StreamsApi(queen)) => context(plan, reg.query_id, queryName, api);
  const cycleOnce = async (rt: RunnerContext) => {
    const pop = await queen.queue(src).pop({ batch: 100, consumerGroup: rt.consumerGroup });
    if (!pop || pop.messages.length === 0) return false;
    for (const batch of groupByPartition(pop)) await processPartitionBatch(rt, batch);
    return true;
  };
  await queen.queue(src).partition('p1').push([{ k: 'a', ts: T + 65_000 }]);
  const first = runner();
  expect(await cycleOnce(first)).toBe(true);
  expect(first.errors).toEqual([]);
  // Two values late for [10:00, 10:01) (keys a and b), one on time.
  await queen.queue(src).partition('p1').push([{ k: 'a', ts: T + 1_000 }, { k: 'b', ts: T + 2_000 }, { k: 'a', ts: T + 66_000 }]);
  return { src, late, plan, reg, runner, cycleOnce };
}

/** Every message on the late queue so far, for a fresh consumer group each call (so a call sees all of them). */
async function lateQueue(late: string): Promise<{ data: LateRecord; transactionId: string }[]> {
  const group = uniqueName('read');
  const got = [];
  for (;;) {
    const res = await b.http('GET', `/api/v1/pop/queue/${encodeURIComponent(late)}?batch=1000&autoAck=true&consumerGroup=${group}`);
    if (res.status === 204 || res.status === 404) return got;
    expect(res.status).toBe(200);
    got.push(...res.body.messages);
  }
}

/** The two records the batch owes, by (key, eventTime) — the content the tests pin. */
const expectedRecords = (queryName: string) => [
  expect.objectContaining({ queryId: queryName, partition: 'p1', offset: '2', key: 'a', eventTimeMs: T + 1_000, window: { start: T, end: T + 60_000 }, watermarkMs: T + 65_000, latenessMs: 5_000 }),
  expect.objectContaining({ queryId: queryName, partition: 'p1', offset: '3', key: 'b', eventTimeMs: T + 2_000, window: { start: T, end: T + 60_000 }, watermarkMs: T + 65_000, latenessMs: 5_000 }),
];

const latePushIds = (body: CycleRequest, late: string) => body.push_items.filter((i) => i.queue === late).map((i) => i.transactionId);

describe('late records are exactly once', () => {
  it('a cycle recomputed after VERSION_CONFLICT pushes each late record once, with the same ids', async () => {
    const { late, reg, runner, cycleOnce } = await setup();
    const api = new StreamsApi(queen);
    const sent: CycleRequest[] = [];
    const answers: (string | undefined)[] = [];
    const cycle = api.cycle.bind(api);
    api.cycle = async (body) => {
      if (sent.length === 0) {
        // Another writer bumps the watermark row between this cycle's read and its commit.
        const [wm] = await api.stateGet({ query_id: reg.query_id, partition_id: body.partition_id, keys: [WATERMARK_KEY] });
        const bump = await cycle({ query_id: reg.query_id, partition_id: body.partition_id, state_ops: [{ type: 'upsert', key: WATERMARK_KEY, value: wm!.value, expected_version: wm!.version }], push_items: [], ack: null });
        expect(bump.success).toBe(true);
      }
      sent.push(body);
      const res = await cycle(body);
      answers.push(res.success ? 'committed' : res.code);
      return res;
    };
    const rt = runner(api);
    expect(await cycleOnce(rt)).toBe(true);
    expect(answers).toEqual(['VERSION_CONFLICT', 'committed']);
    expect(latePushIds(sent[1]!, late)).toEqual(latePushIds(sent[0]!, late));
    const records = await lateQueue(late);
    expect(records.map((r) => r.data)).toEqual(expectedRecords(rt.queryName));
    expect(records.map((r) => r.transactionId)).toEqual(latePushIds(sent[1]!, late));
    expect(rt.metrics).toMatchObject({ cyclesTotal: 1, lateEventsTotal: 2 });
    expect(rt.errors).toEqual([]);
  });

  it('a runner that dies before its cycle reaches the broker: the batch comes back, the new runner pushes the same records once', async () => {
    const { late, runner, cycleOnce } = await setup();
    const api = new StreamsApi(queen);
    let dropped: CycleRequest | undefined;
    api.cycle = async (body) => {
      dropped = body;
      throw new Error('socket hang up (the runner died mid-cycle)');
    };
    const dying = runner(api);
    expect(await cycleOnce(dying)).toBe(true);
    expect(dying.errors.map((e) => e.info.phase)).toEqual(['cycle']);
    expect(await lateQueue(late)).toEqual([]);

    // Nothing committed: once the lease expires, the batch is popped again and recomputed by another runner.
    const next = runner();
    expect(await cycleOnce(next)).toBe(false); // still leased
    await b.clock!.advance(LEASE_S * 1000 + 1000);
    expect(await cycleOnce(next)).toBe(true);
    expect(next.errors).toEqual([]);
    const records = await lateQueue(late);
    expect(records.map((r) => r.data)).toEqual(expectedRecords(next.queryName));
    expect(records.map((r) => r.transactionId)).toEqual(latePushIds(dropped!, late));
    expect(await cycleOnce(next)).toBe(false);
  });

  it('a cycle whose answer is lost after it committed: nothing comes back, and a replay of its pushes is a duplicate', async () => {
    const { late, runner, cycleOnce } = await setup();
    const api = new StreamsApi(queen);
    let committed: CycleRequest | undefined;
    const cycle = api.cycle.bind(api);
    api.cycle = async (body) => {
      committed = body;
      const res = await cycle(body);
      expect(res.success).toBe(true);
      throw new Error('connection reset after the commit');
    };
    const rt = runner(api);
    expect(await cycleOnce(rt)).toBe(true);
    expect(rt.errors.map((e) => e.info.phase)).toEqual(['cycle']);
    const records = await lateQueue(late);
    expect(records.map((r) => r.data)).toEqual(expectedRecords(rt.queryName));

    await b.clock!.advance(LEASE_S * 1000 + 1000);
    expect(await cycleOnce(runner())).toBe(false); // the ack committed with the pushes
    // The same late pushes again (what a replayed emit would send): the sink's dedup answers duplicate.
    const replay = await b.http('POST', '/streams/v1/cycle', { ...committed!, state_ops: [], ack: null, push_items: committed!.push_items.filter((i) => i.queue === late) });
    expect(replay.status).toBe(200);
    expect(replay.body.push_results.map((r: { status: string }) => r.status)).toEqual(['duplicate', 'duplicate']);
    expect((await lateQueue(late)).map((r) => r.transactionId)).toEqual(records.map((r) => r.transactionId));
  });
});
