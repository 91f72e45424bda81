import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleep, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { GAUGE_TOP_N } from './metrics.js';

// The scrape-time gauges of /metrics (queue depth, group lag, DLQ depth,
// stream lag, parked pops, pool) and the Node process metrics, over HTTP.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

async function scrape(): Promise<string> {
  const res = await fetch(`${b.url}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return res.text();
}

/** Every sample of `name` as [labels, value]; labels in the order printed. */
function samples(text: string, name: string): [Record<string, string>, number][] {
  const out: [Record<string, string>, number][] = [];
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const labels = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1]!, l[2]!]));
    out.push([labels, Number(m[3])]);
  }
  return out;
}

function value(text: string, name: string, labels: Record<string, string>): number | undefined {
  return samples(text, name).find(([l]) => Object.entries(labels).every(([k, v]) => l[k] === v))?.[1];
}

const push = (queue: string, n: number, partition = 'Default') =>
  b.http('POST', '/api/v1/push', { items: Array.from({ length: n }, (_, i) => ({ queue, partition, payload: i })) });
const pop = (queue: string, group: string | null, batch: number) =>
  b.http('GET', `/api/v1/pop/queue/${queue}?batch=${batch}${group ? `&consumerGroup=${group}` : ''}`);
const ackAll = (messages: any[], group: string | null, status = 'completed') =>
  b.http('POST', '/api/v1/ack/batch', {
    ...(group ? { consumerGroup: group } : {}),
    acknowledgments: messages.map((m) => ({ transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status })),
  });

describe('/metrics gauges', () => {
  it('queue depth counts after the queue-mode cursor; group lag in messages and seconds; DLQ depth', async () => {
    const a = uniqueName('m-a');
    const c = uniqueName('m-c');
    await push(a, 3, 'p1');
    await push(a, 2, 'p2');
    await push(c, 2);
    // Queue mode consumes 2 of p1.
    const qm = await b.http('GET', `/api/v1/pop/queue/${a}/partition/p1?batch=2`);
    await ackAll(qm.body.messages, null);
    // Group g consumes 1 of p1 and dead-letters none; group d dead-letters one of c.
    const g = await b.http('GET', `/api/v1/pop/queue/${a}/partition/p1?batch=1&consumerGroup=g`);
    await ackAll(g.body.messages, 'g');
    const d = await pop(c, 'd', 1);
    await ackAll(d.body.messages, 'd', 'dlq');
    await sleep(1100);

    const text = await scrape();
    expect(value(text, 'queen_queue_depth', { queue: a })).toBe(3);
    expect(value(text, 'queen_queue_depth', { queue: c })).toBe(2);
    expect(value(text, 'queen_group_lag_messages', { queue: a, group: '__QUEUE_MODE__' })).toBe(1);
    // g has a cursor on p1 only: 2 of p1 left.
    expect(value(text, 'queen_group_lag_messages', { queue: a, group: 'g' })).toBe(2);
    expect(value(text, 'queen_group_lag_seconds', { queue: a, group: 'g' })).toBeGreaterThanOrEqual(1);
    expect(value(text, 'queen_group_lag_seconds', { queue: a, group: 'g' })).toBeLessThan(60);
    // d dead-lettered its head message: the cursor moved past it.
    expect(value(text, 'queen_group_lag_messages', { queue: c, group: 'd' })).toBe(1);
    expect(value(text, 'queen_dlq_depth', { queue: c })).toBe(1);
    expect(value(text, 'queen_dlq_depth', { queue: a })).toBeUndefined();

    // Caught up: lag 0 messages and 0 seconds.
    const rest = await pop(c, 'd', 10);
    await ackAll(rest.body.messages, 'd');
    const after = await scrape();
    expect(value(after, 'queen_group_lag_messages', { queue: c, group: 'd' })).toBe(0);
    expect(value(after, 'queen_group_lag_seconds', { queue: c, group: 'd' })).toBe(0);
  });

  it('stream lag follows the query default group streams.<name>; state rows per query', async () => {
    const src = uniqueName('m-src');
    const name = uniqueName('m-query');
    await push(src, 4);
    const reg = await b.http('POST', '/streams/v1/queries', { name, source_queue: src, config_hash: 'h1' });
    expect(reg.status).toBe(200);
    let text = await scrape();
    expect(value(text, 'queen_stream_lag_messages', { query: name })).toBe(4);
    expect(value(text, 'queen_stream_state_rows', { query: name })).toBe(0);

    const popped = await pop(src, `streams.${name}`, 3);
    const last = popped.body.messages[2];
    const cycle = await b.http('POST', '/streams/v1/cycle', {
      query_id: reg.body.query_id,
      partition_id: last.partitionId,
      consumer_group: `streams.${name}`,
      state_ops: [{ type: 'upsert', key: 'k1', value: { acc: 1 } }, { type: 'upsert', key: 'k2', value: { acc: 2 } }],
      push_items: [],
      ack: { transactionId: last.transactionId, leaseId: last.leaseId },
    });
    expect(cycle.body.success).toBe(true);
    text = await scrape();
    expect(value(text, 'queen_stream_lag_messages', { query: name })).toBe(1);
    expect(value(text, 'queen_stream_state_rows', { query: name })).toBe(2);
  });

  it('parked long-poll pops, pool use and Node process metrics', async () => {
    const q = uniqueName('m-park');
    const parked = [0, 1].map(() => b.http('GET', `/api/v1/pop/queue/${q}?wait=true&timeout=3000`));
    await sleep(300);
    const text = await scrape();
    expect(value(text, 'queen_long_poll_waiting', {})).toBe(2);
    expect(value(text, 'queen_db_pool_connections', { state: 'total' })).toBeGreaterThanOrEqual(1);
    for (const state of ['idle', 'active', 'waiting']) expect(value(text, 'queen_db_pool_connections', { state })).toBeGreaterThanOrEqual(0);
    expect(value(text, 'process_cpu_user_seconds_total', {})).toBeGreaterThan(0);
    expect(value(text, 'process_resident_memory_bytes', {})).toBeGreaterThan(0);
    expect(samples(text, 'nodejs_heap_size_used_bytes').length).toBe(1);
    expect(samples(text, 'nodejs_eventloop_lag_seconds').length).toBe(1);
    await Promise.all(parked);
    expect(value(await scrape(), 'queen_long_poll_waiting', {})).toBe(0);
  });

  it('the listing totals backlog: a new group\'s queue waits for its recount in the background, then drains', async () => {
    const q = uniqueName('m-totals');
    const backlog = async () => Object.fromEntries(samples(await scrape(), 'queen_listing_totals_backlog').map(([l, v]) => [l.kind, v]));
    const drained = async () => {
      for (let i = 0; i < 100; i++) {
        const now = await backlog();
        if (now.partitions === 0 && now.background === 0 && now.queues === 0) return now;
        await sleep(100);
      }
      return backlog();
    };
    for (const p of ['a', 'b', 'c']) await push(q, 1, p);
    // A scrape recounts the partitions this broker wrote first (its gauges read the totals).
    expect(await drained()).toMatchObject({ partitions: 0, background: 0, queues: 0 });
    // A group's first pop of the queue has it recounted whole, in the background.
    expect((await pop(q, uniqueName('g'), 1)).status).toBe(200);
    const after = await backlog();
    expect(after.queues + after.background + after.partitions).toBeGreaterThanOrEqual(1);
    expect(await drained()).toMatchObject({ partitions: 0, background: 0, queues: 0 });
  });

  it(`label sets are capped: the ${GAUGE_TOP_N} deepest queues, deepest first`, async () => {
    const prefix = uniqueName('m-cap');
    const items = [];
    // GAUGE_TOP_N + 20 queues of one message each, and one of 50 (one push).
    for (let i = 0; i < GAUGE_TOP_N + 20; i++) items.push({ queue: `${prefix}-${i}`, payload: i });
    const deep = `${prefix}-deep`;
    for (let k = 0; k < 50; k++) items.push({ queue: deep, payload: k });
    expect((await b.http('POST', '/api/v1/push', { items })).status).toBe(201);
    const text = await scrape();
    const depth = samples(text, 'queen_queue_depth');
    expect(depth).toHaveLength(GAUGE_TOP_N);
    expect(depth.map(([, v]) => v)).toEqual([...depth.map(([, v]) => v)].sort((x, y) => y - x));
    expect(value(text, 'queen_queue_depth', { queue: deep })).toBe(50);
    expect(text).toContain(`# HELP queen_queue_depth`);
  });

  it('a gauge whose statement fails is left out and counted; /metrics still answers', async () => {
    const other = await startTestBroker();
    try {
      await other.sql.query('alter table queen_streams.state rename to state_gone');
      const res = await fetch(`${other.url}/metrics`);
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(samples(text, 'queen_stream_state_rows')).toEqual([]);
      // Series are read concurrently: the error counter shows a failure from the next scrape on.
      const again = await (await fetch(`${other.url}/metrics`)).text();
      expect(value(again, 'queen_metrics_collect_errors_total', { gauge: 'queen_stream_state_rows' })).toBeGreaterThanOrEqual(1);
      expect(value(again, 'queen_metrics_collect_errors_total', { gauge: 'queen_queue_depth' })).toBeUndefined();
      expect(value(text, 'queen_db_pool_connections', { state: 'total' })).toBeGreaterThanOrEqual(1);
    } finally {
      await other.sql.query('alter table queen_streams.state_gone rename to state').catch(() => undefined);
      await other.stop();
    }
  });
});
