import { afterAll, beforeAll, expect } from 'vitest';
import { sleep, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { Queen, type RunHandle } from '../src/index.js';

// Shared by the streams integration tests (outside src/: neither built nor collected as a test).

/** Stream defaults of SCENARIOS.md: the source configured {leaseTime: 2, retryLimit: 100}. */
export async function configureSource(b: TestBroker, queue: string, options: Record<string, unknown> = {}) {
  const res = await b.http('POST', '/api/v1/configure', { queue, options: { leaseTime: 2, retryLimit: 100, ...options } });
  expect(res.status).toBe(200);
}

export interface Pushed {
  partition_id: string;
  offset: string;
  transaction_id: string;
}

export async function push(b: TestBroker, queue: string, payloads: unknown[], partition?: string): Promise<Pushed[]> {
  const res = await b.http('POST', '/api/v1/push', { items: payloads.map((payload) => ({ queue, payload, ...(partition ? { partition } : {}) })) });
  expect(res.status).toBe(201);
  return res.body;
}

export interface SinkMessage {
  data: any;
  partition: string;
  partitionId: string;
  transactionId: string;
  offset: string;
}

/**
 * Everything currently on a queue, read by a fresh group (autoAck) until two
 * consecutive empty pops: `drain(sink)` of SCENARIOS.md. Sorted by partition, then offset.
 */
export async function drain(b: TestBroker, queue: string, group = `drain-${Math.random().toString(16).slice(2)}`): Promise<SinkMessage[]> {
  const out: SinkMessage[] = [];
  let empty = 0;
  while (empty < 2) {
    const res = await b.http('GET', `/api/v1/pop/queue/${encodeURIComponent(queue)}?batch=100&wait=true&timeout=200&autoAck=true&partitions=50&consumerGroup=${encodeURIComponent(group)}`);
    if (res.status === 204) {
      empty += 1;
      continue;
    }
    empty = 0;
    out.push(...res.body.messages);
  }
  return out;
}

/**
 * Polls the sink (one group across polls) until `done(all)` holds; answers
 * everything read. With `settleMs`, keeps reading that long afterwards so a
 * duplicate or extra message would show up in the answer.
 */
export async function collectUntil(b: TestBroker, queue: string, done: (all: SinkMessage[]) => boolean, ms: number, settleMs = 0): Promise<SinkMessage[]> {
  const group = `collect-${Math.random().toString(16).slice(2)}`;
  const all: SinkMessage[] = [];
  const end = Date.now() + ms;
  while (!done(all)) {
    if (Date.now() > end) throw new Error(`sink ${queue}: condition not met within ${ms} ms; got ${JSON.stringify(all.map((m) => m.data))}`);
    const res = await b.http('GET', `/api/v1/pop/queue/${encodeURIComponent(queue)}?batch=500&wait=true&timeout=200&autoAck=true&partitions=50&consumerGroup=${group}`);
    if (res.status === 200) all.push(...res.body.messages);
  }
  const settleEnd = Date.now() + settleMs;
  while (Date.now() < settleEnd) {
    const res = await b.http('GET', `/api/v1/pop/queue/${encodeURIComponent(queue)}?batch=500&wait=true&timeout=200&autoAck=true&partitions=50&consumerGroup=${group}`);
    if (res.status === 200) all.push(...res.body.messages);
  }
  return all;
}

export async function stateRows(b: TestBroker, queryId: string, partitionId: string): Promise<{ key: string; value: any; version: number }[]> {
  const res = await b.http('POST', '/streams/v1/state/get', { query_id: queryId, partition_id: partitionId });
  expect(res.status).toBe(200);
  return res.body.rows;
}

/**
 * The state rows without the processing-time close horizon (`<tag>␟__closed__`):
 * it stays once a window of the partition closed (a value for a window it
 * emitted, read later, is late), like `__wm__` in event time.
 */
export async function windowRows(b: TestBroker, queryId: string, partitionId: string): Promise<{ key: string; value: any; version: number }[]> {
  return (await stateRows(b, queryId, partitionId)).filter((r) => !r.key.endsWith(`${SEP}__closed__`));
}

export async function cursorOf(b: TestBroker, group: string, queue: string, partition = 'Default'): Promise<string | undefined> {
  const res = await b.http('GET', `/api/v1/consumer-groups/${encodeURIComponent(group)}?queue=${encodeURIComponent(queue)}`);
  if (res.status !== 200) return undefined;
  return res.body.partitions.find((p: any) => p.partition === partition)?.cursor;
}

export const sumOf = (msgs: SinkMessage[], field: string) => msgs.reduce((s, m) => s + (m.data?.[field] ?? 0), 0);

export { sleep };

/** Epoch ms as the ISO string a window emit carries. */
export const iso = (epochMs: number) => new Date(epochMs).toISOString();
/** A `.map` after `.aggregate`: the aggregate with its window's bounds as ISO strings. */
export const withBounds = (agg: object, ctx: { windowStart?: number; windowEnd?: number }) => ({ ...agg, start: iso(ctx.windowStart!), end: iso(ctx.windowEnd!) });
/** The payloads of emits, in order. */
export const emitData = (emits: { data: unknown }[]) => emits.map((e) => e.data);

export const SEP = '\u001f';
/** Run options of the SCENARIOS.md stream defaults. */
export const runDefaults = { batchSize: 50, maxWaitMillis: 300 };

/**
 * One broker and one client for a test file (registered as beforeAll /
 * afterAll): `names(prefix)` makes a configured source and fresh sink and
 * query names, `track(handle)` stops a runner when the file is done.
 */
export function useStreamBroker() {
  const env = {
    b: undefined as unknown as TestBroker,
    queen: undefined as unknown as Queen,
    handles: [] as RunHandle[],
    names: async (prefix: string) => {
      const src = uniqueName(`${prefix}-src`);
      const sink = uniqueName(`${prefix}-sink`);
      await configureSource(env.b, src);
      return { src, sink, queryId: uniqueName(prefix) };
    },
    track: (h: RunHandle): RunHandle => {
      env.handles.push(h);
      return h;
    },
  };
  beforeAll(async () => {
    env.b = await startTestBroker();
    env.queen = new Queen({ url: env.b.url });
  });
  afterAll(async () => {
    await Promise.all(env.handles.map((h) => h.stop()));
    await env.queen?.close();
    await env.b?.stop();
  });
  return env;
}
