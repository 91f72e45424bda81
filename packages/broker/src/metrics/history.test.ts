import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { CURRENT_MINUTE_MAX_KEYS } from './history.js';

// The history (migration 032, history.ts, admin/history.ts) over real HTTP:
// its counts are what the brokers answered, whichever broker answered them,
// each counted once; the lag samples are taken once a minute by one broker.

let a: TestBroker;
let b: TestBroker;
beforeAll(async () => {
  // No timer flush during the test: the routes' own flush and explicit ones only.
  a = await startTestBroker({ config: { historyFlushMs: 600_000 } });
  b = await startTestBroker({ databaseUrl: a.databaseUrl, config: { historyFlushMs: 600_000 } });
});
afterAll(async () => {
  await b?.stop();
  await a?.stop();
});

const push = (t: TestBroker, queue: string, partition: string, n: number) =>
  t.http('POST', '/api/v1/push', { items: Array.from({ length: n }, (_, i) => ({ queue, partition, payload: { i } })) });
const pop = async (t: TestBroker, queue: string, qs: string) => (await t.http('GET', `/api/v1/pop/queue/${queue}?${qs}`)).body.messages as any[];
const ackAll = (t: TestBroker, group: string | undefined, msgs: any[], status: string) =>
  t.http('POST', '/api/v1/ack/batch', {
    ...(group ? { consumerGroup: group } : {}),
    acknowledgments: msgs.map((m) => ({ transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status })),
  });
const sum = (points: any[], field: string) => points.reduce((s, p) => s + p[field], 0);

describe('history', () => {
  it('counts what two brokers pushed, popped, acked, failed and dead-lettered, each once, in the queue, its groups and the overview', async () => {
    const q = uniqueName('hist');
    expect((await push(a, q, 'p1', 30)).status).toBe(201);
    expect((await push(b, q, 'p2', 20)).status).toBe(201);
    // Group g1 through broker a: 25 popped, 20 acked, 2 dead-lettered, 3 failed (to be retried).
    const g1 = await pop(a, q, 'consumerGroup=g1&batch=25&partitions=2');
    expect(g1).toHaveLength(25);
    const answered = [
      ...(await ackAll(a, 'g1', g1.slice(0, 20), 'completed')).body,
      ...(await ackAll(a, 'g1', g1.slice(20, 22), 'dlq')).body,
      ...(await ackAll(a, 'g1', g1.slice(22), 'failed')).body,
    ];
    expect(answered.map((x: any) => [x.success, x.dlq]).filter(([ok]) => ok)).toHaveLength(25);
    expect(answered.filter((x: any) => x.dlq)).toHaveLength(2);
    // Queue mode through broker b: 12 popped with autoAck (consumed by the pop), then 8 popped and acked.
    expect(await pop(b, q, 'batch=12&autoAck=true&partitions=2')).toHaveLength(12);
    const qm = await pop(b, q, 'batch=8&partitions=2');
    expect(qm).toHaveLength(8);
    expect((await ackAll(b, undefined, qm, 'completed')).status).toBe(200);

    // Broker b's counts reach the database with its flush; the route flushes a's.
    await b.ctx.metrics.history.flush();
    const r = await a.http('GET', `/api/v1/history/queues/${q}?range=1h`);
    expect(r.status).toBe(200);
    expect(r.body.step).toBe(60);
    expect(r.body.points).toHaveLength(60);
    const totals = Object.fromEntries(['pushed', 'popped', 'acked', 'failed', 'deadLettered'].map((f) => [f, sum(r.body.points, f)]));
    expect(totals).toEqual({ pushed: 50, popped: 45, acked: 40, failed: 5, deadLettered: 2 });
    const groups = Object.fromEntries((r.body.groups as any[]).map((g) => [g.group, ['popped', 'acked', 'failed', 'deadLettered'].map((f) => sum(g.points, f))]));
    expect(groups).toEqual({ g1: [25, 20, 5, 2], __QUEUE_MODE__: [20, 20, 0, 0] });

    // The same numbers through the other broker, and in the 24h and 30d ranges (five-minute and hour buckets).
    for (const range of ['1h', '24h', '30d']) {
      const other = await b.http('GET', `/api/v1/history/queues/${q}?range=${range}`);
      expect(['pushed', 'popped', 'acked', 'failed', 'deadLettered'].map((f) => sum(other.body.points, f))).toEqual([50, 45, 40, 5, 2]);
    }
    const overview = await b.http('GET', '/api/v1/history?range=1h');
    expect(['pushed', 'popped', 'acked', 'failed', 'deadLettered'].map((f) => sum(overview.body.points, f))).toEqual([50, 45, 40, 5, 2]);

    // Flushing again adds nothing: each count was written once.
    await a.ctx.metrics.history.flush();
    await b.ctx.metrics.history.flush();
    const { rows } = await a.sql.query(
      `select step, sum(pushed)::int as pushed, sum(popped)::int as popped, sum(acked)::int as acked
         from queen.queue_history where queue = $1 group by step order by step`,
      [q],
    );
    expect(rows).toEqual([{ step: 60, pushed: 50, popped: 45, acked: 40 }, { step: 3600, pushed: 50, popped: 45, acked: 40 }]);
  });

  it('counts a transaction\'s pushes and acks once it committed, and nothing of one that rolled back', async () => {
    const src = uniqueName('hist-tx-src');
    const dst = uniqueName('hist-tx-dst');
    await push(a, src, 'p', 2);
    const [m1, m2] = await pop(a, src, 'consumerGroup=g&batch=2');
    const ok = await b.http('POST', '/api/v1/transaction', {
      operations: [
        { type: 'push', items: [{ queue: dst, payload: 1 }, { queue: dst, payload: 2 }, { queue: dst, payload: 3 }] },
        { type: 'ack', transactionId: m1.transactionId, partitionId: m1.partitionId, leaseId: m1.leaseId, consumerGroup: 'g' },
      ],
    });
    expect(ok.body.success).toBe(true);
    // Refused whole (the second message is acked with a lease that is not its): nothing committed, nothing counted.
    const refused = await b.http('POST', '/api/v1/transaction', {
      operations: [
        { type: 'push', items: [{ queue: dst, payload: 4 }] },
        { type: 'ack', transactionId: m2.transactionId, partitionId: m2.partitionId, leaseId: '00000000-0000-4000-8000-000000000000', consumerGroup: 'g' },
      ],
    });
    expect(refused.body.success).toBe(false);
    await b.ctx.metrics.history.flush();
    const totals = async (queue: string) => {
      const r = await a.http('GET', `/api/v1/history/queues/${queue}?range=1h`);
      return ['pushed', 'popped', 'acked', 'failed'].map((f) => sum(r.body.points, f));
    };
    expect(await totals(dst)).toEqual([3, 0, 0, 0]);
    expect(await totals(src)).toEqual([2, 2, 1, 0]);
  });

  it('samples lag, depth and DLQ size once a minute: one of two brokers flushing at once takes the sample, and its values are the listing totals', async () => {
    const q = uniqueName('hist-lag');
    await push(a, q, 'p', 7);
    const msgs = await pop(a, q, 'consumerGroup=g&batch=3');
    await ackAll(a, 'g', msgs.slice(0, 2), 'completed');
    await ackAll(a, 'g', msgs.slice(2), 'dlq');
    // The listing totals count these writes (the sample reads them).
    await a.ctx.totals.settle();
    await a.http('GET', '/api/v1/consumer-groups?search=g');
    // Make the last minute unsampled, then flush both brokers at once.
    await a.sql.query(`update queen.history_state set sampled_at = '-infinity'`);
    const flush = (t: TestBroker) => t.sql.query(
      `select queen.history_flush_v2('{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}') as sampled`,
    );
    const answers = await Promise.all([flush(a), flush(b), flush(a), flush(b)]);
    expect(answers.map((r) => r.rows[0].sampled).filter(Boolean)).toHaveLength(1);

    const { rows: totals } = await a.sql.query(`select g.lag::int as lag from queen.group_totals g where g.queue_name = $1 and g.consumer_group = 'g'`, [q]);
    expect(totals).toEqual([{ lag: 4 }]);
    const { rows } = await a.sql.query(
      `select consumer_group as g, step, lag::int, dlq::int from queen.queue_history
        where queue = $1 and (step = 3600 or bucket = (select sampled_at from queen.history_state))
        order by g, step`,
      [q],
    );
    // Group g: 4 not acked; the queue: depth 7 through the queue-mode cursor (never popped), 1 DLQ entry.
    expect(rows.map((r: any) => [r.g, r.step, r.lag, r.dlq])).toEqual([
      ['', 60, 7, 1], ['', 3600, 7, 1], ['g', 60, 4, 0], ['g', 3600, 4, 0],
    ]);
    const r = await b.http('GET', `/api/v1/history/queues/${q}?range=1h`);
    expect(Math.max(...r.body.points.map((p: any) => p.lag))).toBe(7);
    expect(Math.max(...r.body.points.map((p: any) => p.dlq))).toBe(1);
    expect(Math.max(...r.body.groups.find((g: any) => g.group === 'g').points.map((p: any) => p.lag))).toBe(4);
  });

  it('with more than CURRENT_MINUTE_MAX_KEYS keys in the current minute, the timer flush writes ended minutes only; a read flushes the rest', async () => {
    const prefix = uniqueName('hist-many');
    const at = Math.floor(Date.now() / 60_000);
    for (let i = 0; i <= CURRENT_MINUTE_MAX_KEYS; i++) a.ctx.metrics.history.add(`${prefix}-${i}`, '', 'pushed', 2);
    await a.ctx.metrics.history.flush(true);
    const written = async () =>
      (await a.sql.query(`select count(*)::int as n, coalesce(sum(pushed), 0)::int as pushed from queen.queue_history where step = 60 and queue like $1`, [`${prefix}-%`])).rows[0];
    // Unless the minute ended meanwhile (then they are an ended minute's, and written).
    if (Math.floor(Date.now() / 60_000) === at) expect(await written()).toEqual({ n: 0, pushed: 0 });
    await a.ctx.metrics.history.flush();
    expect(await written()).toEqual({ n: CURRENT_MINUTE_MAX_KEYS + 1, pushed: 2 * (CURRENT_MINUTE_MAX_KEYS + 1) });
  });

  it("keeps a query's event-time watermark per bucket: the newest `__wm__` its cycles wrote, through either broker; none without one", async () => {
    const src = uniqueName('h-wm');
    const name = `${src}.q`;
    const reg = await a.http('POST', '/streams/v1/queries', { name, source_queue: src, config_hash: 'h' });
    expect(reg.status).toBe(200);
    const plain = await a.http('POST', '/streams/v1/queries', { name: `${src}.p`, source_queue: src, config_hash: 'h' });
    const versions = new Map<string, number>();
    // Cycles of two partitions, through both brokers: the watermark moves 1:00 → 1:05 on one, 1:03 on the other.
    const t0 = Date.parse('2026-01-05T10:00:00.000Z');
    for (const [t, partition, ms] of [[a, 'p1', t0 + 60_000], [b, 'p1', t0 + 300_000], [a, 'p2', t0 + 180_000]] as const) {
      const pid = `00000000-0000-4000-8000-00000000000${partition === 'p1' ? 1 : 2}`;
      const res = await t.http('POST', '/streams/v1/cycle', {
        query_id: reg.body.query_id,
        partition_id: pid,
        ack: null,
        state_ops: [{ type: 'upsert', key: 'w', value: { acc: 1 } }, { type: 'upsert', key: '__wm__', value: { eventTimeMs: ms }, expected_version: versions.get(pid) ?? 0 }],
      });
      expect(res.body.success).toBe(true);
      versions.set(pid, res.body.state_results[1].version);
    }
    // A query whose cycles write no watermark (processing time) has none.
    await a.http('POST', '/streams/v1/cycle', { query_id: plain.body.query_id, partition_id: '00000000-0000-4000-8000-000000000003', ack: null, state_ops: [{ type: 'upsert', key: 'w', value: {} }] });
    await b.ctx.metrics.history.flush();
    const points = (await a.http('GET', `/streams/v1/queries/${encodeURIComponent(name)}/history?range=1h`)).body.points as any[];
    // One point, or two when the cycles straddled a minute: the newest is 1:05.
    const marks = points.map((p) => p.watermark).filter((w) => w !== null);
    expect(marks.length).toBeGreaterThanOrEqual(1);
    expect(Math.max(...marks)).toBe(t0 + 300_000);
    expect(sum(points, 'flushes')).toBe(3);
    const none = (await a.http('GET', `/streams/v1/queries/${encodeURIComponent(`${src}.p`)}/history?range=1h`)).body.points as any[];
    expect(sum(none, 'flushes')).toBe(1);
    expect(none.every((p) => p.watermark === null)).toBe(true);
  });

  it('answers 404 for a queue or query that does not exist, and 400 for a range it does not know', async () => {
    expect((await a.http('GET', `/api/v1/history/queues/${uniqueName('none')}`)).body.code).toBe('QUEUE_NOT_FOUND');
    expect((await a.http('GET', `/streams/v1/queries/${uniqueName('none')}/history`)).body.code).toBe('QUERY_NOT_FOUND');
    const bad = await a.http('GET', '/api/v1/history?range=1y');
    expect([bad.status, bad.body.code]).toEqual([400, 'VALIDATION_FAILED']);
  });

  it('the maintenance pass trims minute rows past QUEEN_HISTORY_MINUTES_KEPT_H and hour rows past QUEEN_HISTORY_HOURS_KEPT_D', async () => {
    const q = uniqueName('hist-trim');
    await a.sql.query(
      `insert into queen.queue_history (queue, consumer_group, step, bucket, pushed)
       values ($1, '', 60, now() - interval '25 hours', 1), ($1, '', 60, now() - interval '23 hours', 2),
              ($1, '', 3600, now() - interval '31 days', 4), ($1, '', 3600, now() - interval '29 days', 8)`,
      [q],
    );
    const run = await a.http('POST', '/api/v1/system/maintenance/run', { tasks: ['history'] });
    expect(run.status).toBe(200);
    expect(run.body.history.rowsDeleted).toBeGreaterThanOrEqual(2);
    const { rows } = await a.sql.query('select step, pushed::int from queen.queue_history where queue = $1 order by step', [q]);
    expect(rows).toEqual([{ step: 60, pushed: 2 }, { step: 3600, pushed: 8 }]);
  });
});
