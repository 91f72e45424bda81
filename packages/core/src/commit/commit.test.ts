import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queen } from '@queen-mq/client';
import { eventually, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { Stream } from '../stream.js';
import type { RunnerContext } from '../context/runner-context.js';
import type { RunnerEvents } from '../context/events.js';
import type { ErrorInfo } from '../context/runner-context.js';
import { BrokerClock } from '../context/broker-clock.js';
import { RunnerEmitter } from '../context/events.js';
import { PartitionLocks } from '../context/partition-lock.js';
import { StreamsApi } from '../context/state-api.js';
import { MAX_CONFLICT_RETRIES, commitCycle, retryOnConflict } from './commit.js';

// The one commit path (commit.ts) over a real broker: what each answer of
// POST /streams/v1/cycle turns into — counters, events, 'conflict', lease:lost.

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

async function setup() {
  const src = uniqueName('commit-src');
  const plan = Stream.from({ name: src }).map((x) => x).to({ kind: 'foreach', shape: null, effect: () => undefined }).compile();
  const api = new StreamsApi(queen);
  const reg = await api.register({ name: uniqueName('commit'), source_queue: src, config_hash: plan.configHash });
  const events: { name: keyof RunnerEvents; payload: unknown }[] = [];
  const errors: { err: unknown; info: ErrorInfo }[] = [];
  const emitter = new RunnerEmitter();
  for (const name of ['cycle:commit', 'window:flush', 'lease:lost', 'sink:full'] as const) emitter.on(name, (payload) => events.push({ name, payload }));
  const rt: RunnerContext = {
    plan,
    queryId: reg.query_id,
    queryName: 'commit',
    consumerGroup: 'g',
    api,
    locks: new PartitionLocks(),
    events: emitter,
    metrics: { cyclesTotal: 0, flushCyclesTotal: 0, messagesTotal: 0, lateEventsTotal: 0, errorsTotal: 0, gateAllowsTotal: 0, gateDenialsTotal: 0, poisonRetriesTotal: 0, messagesDeadLetteredTotal: 0, emitsDeadLetteredTotal: 0, windowsReemittedTotal: 0, sinkFullTotal: 0 },
    touched: new Map(),
    joinHeld: new Map(),
    joinIdleFlushMs: 0,
    clock: new BrokerClock(),
    logger: console,
    report: (err, info) => void errors.push({ err, info }),
    isStopped: () => false,
    signal: new AbortController().signal,
  };
  await queen.queue(src).push([{ n: 1 }, { n: 2 }]);
  const pop = (await queen.queue(src).pop({ batch: 10, consumerGroup: 'g' }))!;
  const last = pop.messages[pop.messages.length - 1]!;
  return { rt, events, errors, pop, last, partitionId: last.partitionId, partition: last.partition };
}

describe('the commit path', () => {
  it('a cycle with an ack: counted, cycle:commit emitted after the commit bookkeeping; a resend is a lost lease', async () => {
    const { rt, events, errors, pop, last, partitionId, partition } = await setup();
    let bookkept = -1;
    const commit = {
      partitionId,
      partition,
      stateOps: [{ type: 'upsert' as const, key: 'k', value: { v: 1 }, expected_version: 0 }],
      pushItems: [],
      ack: { transactionId: last.transactionId, leaseId: pop.leaseId, status: 'completed' as const },
      messages: 2,
      emits: 2,
      onCommitted: () => void (bookkept = events.length),
    };
    expect(await commitCycle(rt, commit)).toBe('committed');
    expect(bookkept).toBe(0);
    expect(rt.metrics).toMatchObject({ cyclesTotal: 1, messagesTotal: 2, flushCyclesTotal: 0 });
    expect(events).toEqual([{ name: 'cycle:commit', payload: { partitionId, partition, messages: 2, stateOps: 1, pushes: 0, emits: 2 } }]);
    // Resent (its answer lost): the state op no longer matches AND the ack is fenced.
    // The broker answers one of them; either way nothing applies twice and nothing is counted.
    const again = await commitCycle(rt, { ...commit, stateOps: [{ type: 'upsert', key: 'k2', value: 1, expected_version: 0 }] });
    expect(again).toBe('not-committed');
    expect(events[1]).toMatchObject({ name: 'lease:lost', payload: { partitionId, leaseId: pop.leaseId } });
    expect(rt.metrics.cyclesTotal).toBe(1);
    expect(errors).toEqual([]);
  });

  it('VERSION_CONFLICT answers conflict (no event, no count); a flush (ack null) counts as a flush cycle', async () => {
    const { rt, events, partitionId, partition } = await setup();
    const flush = (expected_version: number) =>
      commitCycle(rt, { partitionId, partition, stateOps: [{ type: 'upsert', key: 'f', value: 1, expected_version }], pushItems: [], ack: null, messages: 0, emits: 0 });
    expect(await flush(0)).toBe('committed');
    expect(events).toEqual([{ name: 'window:flush', payload: { partitionId, partition, stateOps: 1, pushes: 0, emits: 0 } }]);
    expect(rt.metrics).toMatchObject({ flushCyclesTotal: 1, cyclesTotal: 0 });
    expect(await flush(0)).toBe('conflict');
    expect(events).toHaveLength(1);
    expect(rt.metrics.flushCyclesTotal).toBe(1);
  });

  it('a refusal other than a conflict or a lost lease is reported with its catalogue code (phase flush for ack null)', async () => {
    const { rt, errors, partitionId, partition } = await setup();
    // A query the broker does not know (dropped under a running runner).
    const gone = { ...rt, queryId: '0195f0a0-0000-7000-8000-00000000dead' };
    expect(await commitCycle(gone, { partitionId, partition, stateOps: [], pushItems: [], ack: null, messages: 0, emits: 0 })).toBe('not-committed');
    expect(errors).toHaveLength(1);
    expect(errors[0]!.info).toEqual({ phase: 'flush', partitionId });
    expect(errors[0]!.err).toMatchObject({ name: 'QueenError', code: 'QUERY_NOT_FOUND' });
    expect(rt.metrics.flushCyclesTotal).toBe(0);
  });

  it('a sink queue at its maxSize is backpressure: the cycle waits (sink:full, doubling), commits nothing meanwhile, and commits once there is room', async () => {
    const { rt, events, errors, pop, last, partitionId, partition } = await setup();
    const sink = uniqueName('commit-sink');
    await b.http('POST', '/api/v1/configure', { queue: sink, options: { maxSize: 1 } });
    await queen.queue(sink).push([{ old: true }]);
    const commit = {
      partitionId,
      partition,
      stateOps: [{ type: 'upsert' as const, key: 'k', value: { v: 1 }, expected_version: 0 }],
      pushItems: [{ queue: sink, payload: { n: 1 }, transactionId: 'emit-1' }],
      ack: { transactionId: last.transactionId, leaseId: pop.leaseId, status: 'completed' as const },
      messages: 2,
      emits: 1,
    };
    const t0 = Date.now();
    const done = commitCycle(rt, commit);
    await eventually(async () => events.filter((e) => e.name === 'sink:full').length === 2, 8000);
    expect(events.filter((e) => e.name === 'sink:full').map((e) => e.payload)).toEqual([
      { partitionId, partition, queue: sink, pending: 1, maxSize: 1, waitMs: 1000 },
      { partitionId, partition, queue: sink, pending: 1, maxSize: 1, waitMs: 2000 },
    ]);
    // Nothing of the cycle is committed while it waits: no state, the source not acked, the sink unchanged.
    expect(await rt.api.stateGet({ query_id: rt.queryId, partition_id: partitionId })).toEqual([]);
    const sinkRows = async () => (await b.sql.query('select m.payload from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1 order by m.msg_offset', [sink])).rows.map((r) => r.payload);
    expect(await sinkRows()).toEqual([{ old: true }]);
    // A consumer of the sink makes room: the same cycle goes through on its next try.
    expect((await b.http('GET', `/api/v1/pop/queue/${sink}?batch=1&autoAck=true`)).body.messages).toHaveLength(1);
    expect(await done).toBe('committed');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(3000);
    expect(await sinkRows()).toEqual([{ old: true }, { n: 1 }]);
    expect(rt.metrics).toMatchObject({ cyclesTotal: 1, messagesTotal: 2, sinkFullTotal: events.filter((e) => e.name === 'sink:full').length });
    expect(events.at(-1)).toMatchObject({ name: 'cycle:commit', payload: { messages: 2, pushes: 1 } });
    expect(errors).toEqual([]);
  });

  it('a flush into a full sink answers deferred at once (its next tick tries again)', async () => {
    const { rt, events, partitionId, partition } = await setup();
    const sink = uniqueName('commit-sink-f');
    await b.http('POST', '/api/v1/configure', { queue: sink, options: { maxSize: 1 } });
    await queen.queue(sink).push([{ old: true }]);
    const flush = { partitionId, partition, stateOps: [{ type: 'upsert' as const, key: 'f', value: 1, expected_version: 0 }], pushItems: [{ queue: sink, payload: 1 }], ack: null, messages: 0, emits: 1 };
    expect(await commitCycle(rt, flush)).toBe('deferred');
    expect(events).toEqual([{ name: 'sink:full', payload: { partitionId, partition, queue: sink, pending: 1, maxSize: 1, waitMs: 0 } }]);
    expect(await rt.api.stateGet({ query_id: rt.queryId, partition_id: partitionId })).toEqual([]);
  });

  it('retryOnConflict recomputes until the attempt stops conflicting, then gives up and reports', async () => {
    const { rt, errors } = await setup();
    let calls = 0;
    expect(await retryOnConflict(rt, 'p', async () => (++calls < 3 ? 'conflict' : 'committed'))).toBe('committed');
    expect(calls).toBe(3);
    calls = 0;
    expect(await retryOnConflict(rt, 'p', async () => (++calls, 'conflict'))).toBe('none');
    expect(calls).toBe(MAX_CONFLICT_RETRIES + 1);
    expect(errors.map((e) => e.info)).toEqual([{ phase: 'cycle', partitionId: 'p' }]);
  });
});
