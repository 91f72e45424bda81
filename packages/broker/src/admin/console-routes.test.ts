import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// The read routes behind the operator's console (packages/console), over
// real HTTP: queues at a glance, a queue's messages, a stream query's
// partitions, open windows and per-query counters (also on /metrics), the
// group detail's time lag, and the caller's session.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

const push = async (queue: string, partition: string, payloads: unknown[]) => {
  const res = await b.http('POST', '/api/v1/push', { items: payloads.map((payload) => ({ queue, partition, payload })) });
  expect(res.status).toBe(201);
  return res.body;
};
const SEP = '\u001f';

describe('console routes', () => {
  it('session: the caller level (admin with auth off), version and the broker clock', async () => {
    const res = await b.http('GET', '/api/v1/console/session');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ level: 'admin', subject: null, authEnabled: false, version: expect.any(String) });
    expect(Math.abs(Date.parse(res.body.serverTime) - Date.now())).toBeLessThan(5000);
  });

  it('queues: depth and oldest unacked at the queue-mode cursor, retained, pushed and delivered totals, DLQ size', async () => {
    const q = uniqueName('cq');
    await push(q, 'a', [1, 2, 3]);
    await push(q, 'b', [4, 5]);
    const popped = await b.http('GET', `/api/v1/pop/queue/${q}/partition/a?batch=2`);
    expect(popped.body.messages).toHaveLength(2);
    const [first, second] = popped.body.messages;
    await b.http('POST', '/api/v1/ack/batch', {
      acknowledgments: [
        { transactionId: first.transactionId, partitionId: first.partitionId, leaseId: first.leaseId, status: 'completed' },
        { transactionId: second.transactionId, partitionId: second.partitionId, leaseId: second.leaseId, status: 'dlq', error: 'bad' },
      ],
    });
    const res = await b.http('GET', `/api/v1/console/queues?limit=1000`);
    expect(res.status).toBe(200);
    const row = res.body.queues.find((x: any) => x.name === q);
    expect(row).toMatchObject({ partitions: 2, depth: 3, retained: 5, pushedTotal: 5, deliveredTotal: 2, dlq: 1 });
    expect(row.oldestUnackedSeconds).toBeGreaterThanOrEqual(0);
    expect(res.body.total).toBeGreaterThanOrEqual(1);

    const paged = await b.http('GET', `/api/v1/console/queues?limit=1&offset=0`);
    expect(paged.body.queues).toHaveLength(1);
    expect((await b.http('GET', '/api/v1/console/queues?limit=0')).body.code).toBe('VALIDATION_FAILED');
  });

  it('messages: newest first, paged with before, payloads and acked flags; unknown queue or partition is a 404', async () => {
    const q = uniqueName('cm');
    await push(q, 'p', [{ n: 1 }, { n: 2 }, { n: 3 }, { n: 4 }, { n: 5 }]);
    const popped = await b.http('GET', `/api/v1/pop/queue/${q}?batch=2&autoAck=true`);
    expect(popped.body.messages).toHaveLength(2);

    const page1 = await b.http('GET', `/api/v1/console/queues/${q}/messages?partition=p&limit=3`);
    expect(page1.status).toBe(200);
    expect(page1.body).toMatchObject({ queue: q, partition: 'p', partitions: ['p'], queueModeCursor: '2', nextBefore: '3' });
    expect(page1.body.messages.map((m: any) => [m.offset, m.data.n, m.acked])).toEqual([
      ['5', 5, false],
      ['4', 4, false],
      ['3', 3, false],
    ]);
    const page2 = await b.http('GET', `/api/v1/console/queues/${q}/messages?partition=p&limit=3&before=3`);
    expect(page2.body.messages.map((m: any) => [m.offset, m.acked])).toEqual([
      ['2', true],
      ['1', true],
    ]);
    expect(page2.body.nextBefore).toBeNull();

    expect((await b.http('GET', `/api/v1/console/queues/${q}/messages`)).body.partition).toBe('p');
    expect((await b.http('GET', `/api/v1/console/queues/${q}/messages?partition=nope`)).body.code).toBe('PARTITION_NOT_FOUND');
    expect((await b.http('GET', `/api/v1/console/queues/${uniqueName('none')}/messages`)).body.code).toBe('QUEUE_NOT_FOUND');
  });

  it('group detail reports the time lag of each partition (0 when caught up)', async () => {
    const q = uniqueName('cg');
    await push(q, 'x', [1, 2]);
    await push(q, 'y', [1]);
    await b.http('GET', `/api/v1/pop/queue/${q}/partition/y?batch=1&autoAck=true&consumerGroup=g`);
    await b.http('GET', `/api/v1/pop/queue/${q}/partition/x?batch=1&autoAck=true&consumerGroup=g`);
    await new Promise((r) => setTimeout(r, 1100));
    const res = await b.http('GET', `/api/v1/consumer-groups/g?queue=${q}`);
    const byName = Object.fromEntries(res.body.partitions.map((p: any) => [p.partition, p]));
    expect(byName.y).toMatchObject({ lag: 0, timeLag: 0 });
    expect(byName.x.lag).toBe(1);
    expect(byName.x.timeLag).toBeGreaterThanOrEqual(1);
  });

  it('stream partitions, open windows and per-query counters (JSON and /metrics)', async () => {
    const source = uniqueName('src');
    const sink = `${source}.out`;
    const name = `${source}.q`;
    const group = `streams.${name}`;
    await push(source, 'p1', [{ v: 1 }, { v: 2 }]);
    await push(source, 'p2', [{ v: 3 }]);
    const reg = await b.http('POST', '/streams/v1/queries', { name, source_queue: source, sink_queue: sink, config_hash: 'h1' });
    const queryId = reg.body.query_id;

    const popped = await b.http('GET', `/api/v1/pop/queue/${source}/partition/p1?batch=2&consumerGroup=${group}`);
    const last = popped.body.messages[1];
    const now = Date.now();
    const open = { acc: { n: 2 }, windowStart: now - 1000, windowEnd: now + 3600_000 };
    const ripe = { acc: { n: 1 }, windowStart: now - 120_000, windowEnd: now - 60_000 };
    const cycle = await b.http('POST', '/streams/v1/cycle', {
      query_id: queryId,
      partition_id: last.partitionId,
      consumer_group: group,
      state_ops: [
        { type: 'upsert', key: `tumb:3600${SEP}open${SEP}k1`, value: open },
        { type: 'upsert', key: `tumb:60${SEP}ripe${SEP}k0`, value: ripe },
        { type: 'upsert', key: '__wm__', value: { wm: now } },
      ],
      push_items: [{ queue: sink, payload: { emitted: 1 }, transactionId: 'emit-1' }],
      ack: { transactionId: last.transactionId, leaseId: last.leaseId },
    });
    expect(cycle.body.success).toBe(true);
    // An idle flush (ack:null) and a failing element (version conflict).
    const flush = await b.http('POST', '/streams/v1/cycle', {
      query_id: queryId,
      partition_id: last.partitionId,
      push_items: [{ queue: sink, payload: { emitted: 2 } }, { queue: sink, payload: { emitted: 3 } }, { queue: sink, payload: { emitted: 1 }, transactionId: 'emit-1' }],
      ack: null,
    });
    expect(flush.body).toMatchObject({ success: true, push_counts: { queued: 2, duplicate: 1 } });
    const conflict = await b.http('POST', '/streams/v1/cycle', {
      query_id: queryId,
      partition_id: last.partitionId,
      state_ops: [{ type: 'upsert', key: 'x', value: 1, expected_version: 99 }],
      ack: null,
    });
    expect(conflict.body).toMatchObject({ success: false, code: 'VERSION_CONFLICT' });
    // Unknown queries are not counted.
    await b.http('POST', '/streams/v1/cycle', { query_id: randomUUID(), partition_id: last.partitionId, ack: null });

    const parts = await b.http('GET', `/streams/v1/queries/${encodeURIComponent(name)}/partitions`);
    expect(parts.status).toBe(200);
    expect(parts.body).toMatchObject({ query_id: queryId, source_queue: source, sink_queue: sink, consumer_group: group, total: 2 });
    expect(parts.body.partitions.map((p: any) => [p.partition, p.cursor, p.head_offset, p.lag, p.state_rows, p.open_windows])).toEqual([
      ['p1', '2', '2', 0, 3, 2],
      ['p2', '0', '1', 1, 0, 0],
    ]);

    const windows = await b.http('GET', `/streams/v1/queries/${encodeURIComponent(name)}/windows`);
    expect(windows.status).toBe(200);
    expect(windows.body.total).toBe(2);
    expect(windows.body.windows.map((w: any) => [w.partition, w.window_key, w.window_start, w.window_end, w.value, w.ripe])).toEqual([
      ['p1', 'k0', ripe.windowStart, ripe.windowEnd, { acc: { n: 1 } }, true],
      ['p1', 'k1', open.windowStart, open.windowEnd, { acc: { n: 2 } }, false],
    ]);
    const limited = await b.http('GET', `/streams/v1/queries/${encodeURIComponent(name)}/windows?limit=1&partition=p1`);
    expect(limited.body).toMatchObject({ total: 2, windows: [{ window_key: 'k0' }] });
    expect((await b.http('GET', `/streams/v1/queries/${encodeURIComponent(name)}/windows?partition=p2`)).body.windows).toEqual([]);
    expect((await b.http('GET', '/streams/v1/queries/nope/windows')).body.code).toBe('QUERY_NOT_FOUND');
    expect((await b.http('GET', '/streams/v1/queries/nope/partitions')).status).toBe(404);

    const counters = await b.http('GET', '/streams/v1/counters');
    expect(counters.status).toBe(200);
    const mine = counters.body.queries.find((c: any) => c.name === name);
    expect(mine).toMatchObject({ query_id: queryId, cycles: 2, flushes: 1, emitted: 3, duplicates: 1, errors: 1, last_error_code: 'VERSION_CONFLICT' });
    expect(Date.parse(mine.last_cycle_at)).toBeGreaterThan(now - 5000);
    expect(counters.body.queries.every((c: any) => typeof c.name === 'string')).toBe(true);

    const metrics = (await b.http('GET', '/metrics')).body as string;
    const label = `query="${name}"`;
    expect(metrics).toContain(`queen_stream_query_cycles_total{${label}} 2`);
    expect(metrics).toContain(`queen_stream_query_flushes_total{${label}} 1`);
    expect(metrics).toContain(`queen_stream_query_emitted_total{${label}} 3`);
    expect(metrics).toContain(`queen_stream_query_duplicates_total{${label}} 1`);
    expect(metrics).toContain(`queen_stream_query_errors_total{${label}} 1`);
    expect(metrics).toMatch(new RegExp(`queen_stream_query_last_cycle_timestamp_seconds\\{query="${name.replace(/[.]/g, '\\.')}"\\} \\d+`));

    // Dropped: gone from the counters and the series.
    await b.http('POST', '/streams/v1/queries/drop', { name });
    expect((await b.http('GET', '/streams/v1/counters')).body.queries.find((c: any) => c.name === name)).toBeUndefined();
    expect((await b.http('GET', '/metrics')).body).not.toContain(label);
  });
});
