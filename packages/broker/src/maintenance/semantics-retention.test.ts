import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, sleep, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// Retention and partition cleanup (PROTOCOL §3.9, §5.10 maintenance run),
// over real HTTP on a real PostgreSQL. Segments hold 3 messages here so that
// partial drops are easy to arrange.

let b: TestBroker;
let cleanup: TestBroker;
beforeAll(async () => {
  b = await startTestBroker({ config: { segmentMaxMessages: 3 } });
  cleanup = await startTestBroker({ config: { partitionCleanupS: 1 } });
});
afterAll(async () => {
  await b?.stop();
  await cleanup?.stop();
});

type Broker = TestBroker;
const push = (x: Broker, queue: string, items: Record<string, unknown>[], partition = 'Default') =>
  x.http('POST', '/api/v1/push', { items: items.map((i) => ({ queue, partition, ...i })) });
const pop = (x: Broker, queue: string, params = '', partition?: string) =>
  x.http('GET', `/api/v1/pop/queue/${queue}${partition ? `/partition/${partition}` : ''}?${params}`);
const run = async (x: Broker, tasks?: string[]) => {
  const r = await x.http('POST', '/api/v1/system/maintenance/run', tasks ? { tasks } : {});
  expect(r.status).toBe(200);
  return r.body;
};
const partitions = async (x: Broker, queue: string) => (await x.http('GET', `/api/v1/resources/queues/${queue}`)).body.partitions as any[];
const many = (n: number, from = 0) => Array.from({ length: n }, (_, i) => ({ payload: { i: i + from } }));
const ackTo = (x: Broker, g: string, m: any, leaseId?: string) =>
  x.http('POST', '/api/v1/ack', { consumerGroup: g, transactionId: m.transactionId, partitionId: m.partitionId, ...(leaseId ? { leaseId } : {}) });

describe('retention', () => {
  it('maintenance run answers every counter, and only the tasks asked for run', async () => {
    const r = await run(b);
    expect(r).toEqual({
      success: true,
      retention: { segmentsDropped: expect.any(Number), messagesDropped: expect.any(Number) },
      partitions: { deleted: expect.any(Number), vetoed: expect.any(Number) },
      kv: { expiredPurged: 0 },
      timers: { fired: 0 },
      state: { expiredDeleted: 0 },
      history: { rowsDeleted: 0 },
    });
    const q = uniqueName('tasks');
    await b.http('POST', '/api/v1/configure', { queue: q, options: { maxWaitTimeSeconds: 1 } });
    await push(b, q, many(2));
    await sleep(1500);
    expect((await run(b, ['partitions'])).retention).toEqual({ segmentsDropped: 0, messagesDropped: 0 });
    expect((await partitions(b, q))[0].headOffset).toBe('2');
    expect((await partitions(b, q))[0].firstOffset).toBe('1');
    expect((await run(b, ['retention'])).retention.messagesDropped).toBeGreaterThanOrEqual(2);
    // max wait drops without a DLQ entry.
    expect((await partitions(b, q))[0]).toMatchObject({ firstOffset: '3', headOffset: '2', segments: 0 });
    expect((await b.http('GET', `/api/v1/dlq?queue=${q}`)).body.total).toBe(0);
    expect((await pop(b, q)).status).toBe(204);
  });

  it('B8 dedup lasts while retained; offsets are never reused', async () => {
    const q = uniqueName('b8');
    await b.http('POST', '/api/v1/configure', { queue: q, options: { retentionEnabled: true, retentionSeconds: 1 } });
    const first = await push(b, q, [{ payload: 'a', transactionId: 'T' }]);
    expect(first.body[0]).toMatchObject({ status: 'queued', offset: '1' });
    expect((await push(b, q, [{ payload: 'a', transactionId: 'T' }])).body[0].status).toBe('duplicate');
    await sleep(2000);
    const r = await run(b);
    expect(r.retention.segmentsDropped).toBeGreaterThanOrEqual(1);
    const again = await push(b, q, [{ payload: 'a', transactionId: 'T' }]);
    expect(again.body[0]).toMatchObject({ status: 'queued', offset: '2' });
    expect((await partitions(b, q))[0]).toMatchObject({ firstOffset: '2', headOffset: '2', segments: 1 });
    const got = await pop(b, q, 'batch=10');
    expect(got.body.messages.map((m: any) => m.offset)).toEqual(['2']);
  });

  it('B39 completed retention waits for the slowest group', async () => {
    const q = uniqueName('b39');
    await cleanup.http('POST', '/api/v1/configure', { queue: q, options: { retentionEnabled: true, completedRetentionSeconds: 1 } });
    await push(cleanup, q, many(10));
    const a = await pop(cleanup, q, 'consumerGroup=A&batch=10');
    await ackTo(cleanup, 'A', a.body.messages[9]);
    const bb = await pop(cleanup, q, 'consumerGroup=B&batch=10');
    await ackTo(cleanup, 'B', bb.body.messages[3]);
    await sleep(2000);
    expect((await run(cleanup, ['retention'])).retention.messagesDropped).toBe(0);
    await ackTo(cleanup, 'B', bb.body.messages[9]);
    const r = await run(cleanup, ['retention']);
    expect(r.retention.messagesDropped).toBe(10);
    expect((await partitions(cleanup, q))[0]).toMatchObject({ firstOffset: '11', headOffset: '10' });
    // Retention never touches cursors.
    const g = await cleanup.http('GET', `/api/v1/consumer-groups/B?queue=${q}`);
    expect(g.body.partitions[0]).toMatchObject({ cursor: '10', lag: 0 });
  });

  it('a partition whose segments were partly dropped still acks correctly: ack of K walks retained offsets only', async () => {
    const q = uniqueName('walk');
    await b.http('POST', '/api/v1/configure', { queue: q, options: { retentionEnabled: true, retentionSeconds: 1, leaseTime: 1 } });
    await push(b, q, many(3)); // segment [1..3]
    await sleep(1500);
    await push(b, q, many(6, 3)); // segments [4..6], [7..9]
    const r = await run(b, ['retention']);
    // Counters are database-wide (other queues of this suite may add to them); q's own state is exact.
    expect(r.retention.segmentsDropped).toBeGreaterThanOrEqual(1);
    expect(r.retention.messagesDropped).toBeGreaterThanOrEqual(3);
    const part = (await partitions(b, q))[0];
    expect(part).toMatchObject({ firstOffset: '4', headOffset: '9', segments: 2 });

    // The walk from cursor 0 skips the dropped offsets 1..3 instead of counting them.
    const { rows } = await b.sql.query('select queen.log_advance_v1($1, 0, 3)::text as k3, queen.log_advance_v1($1, 0, 7)::text as k7', [part.id]);
    expect(rows[0]).toEqual({ k3: '6', k7: null });

    // A group that never read anything starts at the first retained offset.
    const got = await pop(b, q, 'consumerGroup=W&batch=10');
    expect(got.body.messages.map((m: any) => m.offset)).toEqual(['4', '5', '6', '7', '8', '9']);
    const partial = await ackTo(b, 'W', got.body.messages[2], got.body.leaseId);
    expect(partial.body[0]).toMatchObject({ success: true, offset: '6', leaseReleased: false });
    const g = await b.http('GET', `/api/v1/consumer-groups/W?queue=${q}`);
    expect(g.body.partitions[0]).toMatchObject({ cursor: '6', lag: 3 });
    // After the lease expires the rest comes back in order, uncharged.
    await sleep(1200);
    const rest = await pop(b, q, 'consumerGroup=W&batch=10');
    expect(rest.body.messages.map((m: any) => [m.offset, m.retryCount])).toEqual([
      ['7', 0],
      ['8', 0],
      ['9', 0],
    ]);
    const done = await ackTo(b, 'W', rest.body.messages[2], rest.body.leaseId);
    expect(done.body[0]).toMatchObject({ success: true, leaseReleased: true });
    // An already-dropped message is simply gone.
    const gone = await b.http('POST', '/api/v1/ack', { consumerGroup: 'X', transactionId: 'nope', partitionId: part.id });
    expect(gone.body[0].code).toBe('MESSAGE_NOT_FOUND');
  });

  it('retention drops DLQ entries and failure records with their messages, and leaves the open segment reusable', async () => {
    const q = uniqueName('dlqdrop');
    await b.http('POST', '/api/v1/configure', { queue: q, options: { retentionEnabled: true, retentionSeconds: 1 } });
    await push(b, q, many(2));
    const m = await pop(b, q, 'consumerGroup=D');
    await b.http('POST', '/api/v1/ack', { consumerGroup: 'D', transactionId: m.body.messages[0].transactionId, partitionId: m.body.partitionId, status: 'dlq' });
    const m2 = await pop(b, q, 'consumerGroup=D');
    await b.http('POST', '/api/v1/ack', { consumerGroup: 'D', transactionId: m2.body.messages[0].transactionId, partitionId: m2.body.partitionId, status: 'failed' });
    expect((await b.http('GET', `/api/v1/dlq?queue=${q}`)).body.total).toBe(1);
    await sleep(1500);
    const r = await run(b, ['retention']);
    expect(r.retention.messagesDropped).toBeGreaterThanOrEqual(2);
    const { rows } = await b.sql.query(
      `select (select count(*)::int from queen.dlq where partition_id = $1) as dlq, (select count(*)::int from queen.failures where partition_id = $1) as failures,
              (select segment_first from queen.partitions where id = $1) as segment_first`,
      [m.body.partitionId],
    );
    expect(rows[0]).toEqual({ dlq: 0, failures: 0, segment_first: null });
    // The next push opens a fresh segment at the next offset.
    const next = await push(b, q, many(1));
    expect(next.body[0].offset).toBe('3');
    expect((await partitions(b, q))[0]).toMatchObject({ firstOffset: '3', headOffset: '3', segments: 1 });
    expect((await pop(b, q, 'consumerGroup=D')).body.messages[0]).toMatchObject({ offset: '3', retryCount: 0 });
  });
});

describe('partition cleanup', () => {
  it('B40 an empty, inactive partition is deleted unless a stream state row vetoes it', async () => {
    const { rows: has } = await cleanup.sql.query(`select to_regclass('queen_streams.state') is not null as ok`);
    const q = uniqueName('b40');
    await cleanup.http('POST', '/api/v1/configure', { queue: q, options: { retentionEnabled: true, retentionSeconds: 1 } });
    await push(cleanup, q, many(1), 'p1');
    await push(cleanup, q, many(1), 'p2');
    const ids = Object.fromEntries((await partitions(cleanup, q)).map((p) => [p.name, p.id]));
    if (has[0].ok) {
      const { rows } = await cleanup.sql.query(
        `insert into queen_streams.queries (name, source_queue, config_hash) values ($1, $2, 'h') returning query_id`,
        [uniqueName('query'), q],
      );
      await cleanup.sql.query(`insert into queen_streams.state (query_id, partition_id, key, value, version) values ($1, $2, 'k', '{}', 1)`, [
        rows[0].query_id,
        ids.p2,
      ]);
    } else {
      // No streams schema on this broker: a live lease is the other veto.
      await pop(cleanup, q, '', 'p2');
    }
    await sleep(2000);
    const r = await run(cleanup);
    expect(r.retention.messagesDropped).toBeGreaterThanOrEqual(2);
    expect(r.partitions.deleted).toBeGreaterThanOrEqual(1);
    expect(r.partitions.vetoed).toBe(1);
    const left = (await partitions(cleanup, q)).map((p) => p.name);
    expect(left).toContain('p2');
    expect(left).not.toContain('p1');
    expect(left).not.toContain('Default'); // configured, never written, inactive: cleaned too
    const { rows: cursors } = await cleanup.sql.query('select count(*)::int as n from queen.cursors where partition_id = $1', [ids.p1]);
    expect(cursors[0].n).toBe(0);

    // A push to the deleted partition re-creates it through this broker's (stale) cache.
    const again = await push(cleanup, q, many(1), 'p1');
    expect(again.status).toBe(201);
    expect(again.body[0].offset).toBe('1');
    expect(again.body[0].partition_id).not.toBe(ids.p1);
  });

  it('B40 a live lease vetoes the cleanup of an empty partition', async () => {
    const q = uniqueName('b40l');
    await cleanup.http('POST', '/api/v1/configure', { queue: q, options: { retentionEnabled: true, retentionSeconds: 1 } });
    await push(cleanup, q, many(1), 'leased');
    await push(cleanup, q, many(1), 'free');
    const leased = await pop(cleanup, q, '', 'leased');
    expect(leased.status).toBe(200);
    await sleep(2000);
    const before = await run(cleanup);
    expect(before.partitions.vetoed).toBeGreaterThanOrEqual(1);
    const left = (await partitions(cleanup, q)).map((p) => p.name);
    expect(left).toEqual(['leased']);
    // Once the lease is gone the partition goes too.
    await cleanup.sql.query(`update queen.cursors set lease_expires_at = now() - interval '1 second' where partition_id = $1`, [leased.body.partitionId]);
    await run(cleanup, ['partitions']);
    expect((await partitions(cleanup, q)).map((p) => p.name)).toEqual([]);
  });
});

describe('retention service', () => {
  it('the broker runs retention on its own every QUEEN_RETENTION_INTERVAL_MS', async () => {
    const svc = await startTestBroker({ config: { retentionIntervalMs: 1000 } });
    try {
      const q = uniqueName('svc');
      await svc.http('POST', '/api/v1/configure', { queue: q, options: { maxWaitTimeSeconds: 1 } });
      await push(svc, q, many(3));
      await eventually(async () => (await partitions(svc, q))[0].firstOffset === '4', 8000, 200);
      expect((await partitions(svc, q))[0].headOffset).toBe('3');
    } finally {
      await svc.stop();
    }
  });

  it('concurrent maintenance runs on two replicas serialise and drop each segment once', async () => {
    const other = await startTestBroker({ databaseUrl: b.databaseUrl, config: { segmentMaxMessages: 3 } });
    try {
      const q = uniqueName('twice');
      await b.http('POST', '/api/v1/configure', { queue: q, options: { maxWaitTimeSeconds: 1 } });
      await push(b, q, many(9));
      await sleep(1500);
      const [r1, r2] = await Promise.all([run(b, ['retention']), run(other, ['retention'])]);
      const { rows } = await b.sql.query(`select count(*)::int as n from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1`, [q]);
      expect(rows[0].n).toBe(0);
      // Each of the 3 segments of q was dropped by exactly one of the two runs (other queues may add to both).
      expect(r1.retention.segmentsDropped + r2.retention.segmentsDropped).toBeGreaterThanOrEqual(3);
      expect((await partitions(b, q))[0]).toMatchObject({ firstOffset: '10', headOffset: '9', segments: 0 });
    } finally {
      await other.stop();
    }
  });
});
