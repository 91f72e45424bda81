import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// Configure, queue delete, consumer groups, seek, DLQ listing and the pop pause
// (PROTOCOL §5.1, §5.2, §5.8, §5.9, §5.10), over real HTTP on a real PostgreSQL.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

const push = (queue: string, items: Record<string, unknown>[], partition = 'Default') =>
  b.http('POST', '/api/v1/push', { items: items.map((i) => ({ queue, partition, ...i })) });
const pop = (queue: string, params = '', partition?: string) =>
  b.http('GET', `/api/v1/pop/queue/${encodeURIComponent(queue)}${partition ? `/partition/${encodeURIComponent(partition)}` : ''}?${params}`);
const group = (g: string) => b.http('GET', `/api/v1/consumer-groups/${encodeURIComponent(g)}`);
const queueInfo = (q: string) => b.http('GET', `/api/v1/resources/queues/${encodeURIComponent(q)}`);
const many = (n: number, from = 0) => Array.from({ length: n }, (_, i) => ({ payload: { i: i + from } }));

async function consumeAll(queue: string, g: string, batch = 100): Promise<number[]> {
  const seen: number[] = [];
  for (;;) {
    const r = await pop(queue, `consumerGroup=${g}&batch=${batch}`);
    if (r.status === 204) return seen;
    seen.push(...r.body.messages.map((m: any) => m.data.i));
    const acks = r.body.messages.map((m: any) => ({ transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId }));
    const a = await b.http('POST', '/api/v1/ack/batch', { consumerGroup: g, acknowledgments: acks });
    expect(a.body.every((x: any) => x.success)).toBe(true);
  }
}

const everyOption = {
  leaseTime: 11,
  retryLimit: 9,
  delayedProcessing: 1,
  windowBuffer: 2,
  retentionEnabled: true,
  retentionSeconds: 100,
  completedRetentionSeconds: 50,
  maxWaitTimeSeconds: 400,
  leaseExpiryCountsAsFailure: true,
  retryDelay: 5,
  retryBackoff: 'exponential',
  retryDelayMax: 60000,
  ttl: 7,
  maxSize: 8,
  priority: 4,
  deadLetterQueue: true,
  dlqAfterMaxRetries: true,
  claimOrder: 'oldest',
  partitionWeights: { 'tenant-a/': 3, vip: 10 },
  conflatedGroups: ['dashboard'],
};

describe('configure', () => {
  it('B1 configure merges: omitted options keep their value, null resets one', async () => {
    const q = uniqueName('b1');
    const first = await b.http('POST', '/api/v1/configure', { queue: q, options: everyOption });
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ configured: true, queue: q, options: { ...everyOption, encryptionEnabled: false } });
    expect(first.body.queueId).toMatch(/^[0-9a-f-]{36}$/);
    expect(first.body.partitionId).toMatch(/^[0-9a-f-]{36}$/);

    const second = await b.http('POST', '/api/v1/configure', { queue: q, options: { leaseTime: 7 } });
    expect(second.status).toBe(200);
    expect(second.body.options).toEqual({ ...everyOption, leaseTime: 7, encryptionEnabled: false });

    const third = await b.http('POST', '/api/v1/configure', { queue: q, options: { retryLimit: null } });
    expect(third.body.options).toEqual({ ...everyOption, leaseTime: 7, retryLimit: 3, encryptionEnabled: false });
    expect(third.body.queueId).toBe(first.body.queueId);
    expect(third.body.partitionId).toBe(first.body.partitionId);

    // The stored options are what pop and retention read.
    const info = await queueInfo(q);
    expect(info.body.options).toMatchObject({ leaseTime: 7, retryLimit: 3, retentionSeconds: 100 });
    expect(info.body.partitions.map((p: any) => p.name)).toEqual(['Default']);
  });

  it('B1 configure defaults namespace and task from the queue name and keeps them on merge', async () => {
    const q = `${uniqueName('ns')}.orders`;
    const r = await b.http('POST', '/api/v1/configure', { queue: q });
    expect(r.body).toMatchObject({ namespace: q.split('.')[0], task: 'orders', options: { leaseTime: 300, retryLimit: 3 } });
    const r2 = await b.http('POST', '/api/v1/configure', { queue: q, task: 'billing' });
    expect(r2.body).toMatchObject({ namespace: q.split('.')[0], task: 'billing' });
    const r3 = await b.http('POST', '/api/v1/configure', { queue: q, options: { ttl: 1 } });
    expect(r3.body.task).toBe('billing');
  });

  it('B1 configure of a queue that push created keeps its messages and applies the options', async () => {
    const q = uniqueName('b1p');
    await push(q, many(2));
    const r = await b.http('POST', '/api/v1/configure', { queue: q, options: { leaseTime: 1 } });
    expect(r.status).toBe(200);
    const info = await queueInfo(q);
    expect(info.body.partitions[0]).toMatchObject({ name: 'Default', headOffset: '2' });
  });

  it('X9 bad configure: three details, nothing changes', async () => {
    const q = uniqueName('x9');
    await b.http('POST', '/api/v1/configure', { queue: q, options: { leaseTime: 5 } });
    const r = await b.http('POST', '/api/v1/configure', { queue: q, options: { leaseTime: 'abc', retryLimit: -1, retentionEnabled: 'yes' } });
    expect(r.status).toBe(400);
    expect(r.body.code).toBe('VALIDATION_FAILED');
    expect(r.body.details.map((d: any) => d.field).sort()).toEqual(['body.options.leaseTime', 'body.options.retentionEnabled', 'body.options.retryLimit']);
    const info = await queueInfo(q);
    expect(info.body.options).toMatchObject({ leaseTime: 5, retryLimit: 3, retentionEnabled: false });

    const bad = await b.http('POST', '/api/v1/configure', { queue: q, options: { leaseTime: 1.5 } });
    expect(bad.status).toBe(400);
    const noQueue = await b.http('POST', '/api/v1/configure', { options: {} });
    expect(noQueue.status).toBe(400);
    expect(noQueue.body.details[0].field).toBe('body.queue');
  });

  it('X9 encryptionEnabled without QUEEN_ENCRYPTION_KEY → 400 and nothing changes (not even the queue)', async () => {
    const q = uniqueName('enc');
    const r = await b.http('POST', '/api/v1/configure', { queue: q, options: { encryptionEnabled: true, leaseTime: 9 } });
    expect(r.status).toBe(400);
    expect(r.body.details[0].field).toBe('body.options.encryptionEnabled');
    expect((await queueInfo(q)).status).toBe(404);
    // The key is read at start-up, so a key set now changes nothing on this broker;
    // an existing queue keeps its options (B46 in encryption.test.ts covers a keyed broker).
    await b.http('POST', '/api/v1/configure', { queue: q, options: { leaseTime: 4 } });
    const again = await b.http('POST', '/api/v1/configure', { queue: q, options: { encryptionEnabled: true, leaseTime: 9 } });
    expect(again.status).toBe(400);
    expect((await queueInfo(q)).body.options).toMatchObject({ leaseTime: 4, encryptionEnabled: false });
  });
});

describe('queues', () => {
  it('B41 delete queue removes everything incl. subscriptions; idempotent', async () => {
    const q = uniqueName('b41');
    await b.http('POST', '/api/v1/configure', { queue: q, options: { retryLimit: 0 } });
    await push(q, many(3));
    // A DLQ entry.
    const m = await pop(q, 'consumerGroup=D');
    const dead = await b.http('POST', '/api/v1/ack', { consumerGroup: 'D', transactionId: m.body.messages[0].transactionId, partitionId: m.body.partitionId, status: 'dlq', error: 'x' });
    expect(dead.body[0].dlq).toBe(true);
    // Group N joined far in the future: sees nothing of the old queue.
    expect((await pop(q, 'consumerGroup=N&subscriptionFrom=2099-01-01T00:00:00Z')).status).toBe(204);
    const partitionId = m.body.partitionId;

    const del = await b.http('DELETE', `/api/v1/resources/queues/${q}`);
    expect(del.status).toBe(200);
    expect(del.body).toEqual({ deleted: true, queue: q, existed: true });
    expect((await queueInfo(q)).status).toBe(404);
    for (const table of ['messages', 'log_segments', 'cursors', 'failures', 'dlq']) {
      const { rows } = await b.sql.query(`select count(*)::int as n from queen.${table} where partition_id = $1`, [partitionId]);
      expect(rows[0].n, table).toBe(0);
    }
    const subs = await b.sql.query(`select count(*)::int as n from queen.subscriptions s where s.consumer_group = 'N'
      and not exists (select 1 from queen.queues q where q.id = s.queue_id)`);
    expect(subs.rows[0].n).toBe(0);
    expect((await b.http('GET', `/api/v1/dlq?queue=${q}`)).body.total).toBe(0);

    // Re-created: the subscription is forgotten (fix), offsets start again at 1.
    const again = await push(q, many(2));
    expect(again.body.map((r: any) => r.offset)).toEqual(['1', '2']);
    const n = await pop(q, 'consumerGroup=N&subscriptionMode=all&batch=10');
    expect(n.status).toBe(200);
    expect(n.body.messages).toHaveLength(2);

    expect((await b.http('DELETE', `/api/v1/resources/queues/${q}`)).body.existed).toBe(true);
    const gone = await b.http('DELETE', `/api/v1/resources/queues/${q}`);
    expect(gone.status).toBe(200);
    expect(gone.body).toEqual({ deleted: true, queue: q, existed: false });
  });

  it('B41 a push after a delete on the same broker re-creates the queue (no stale partition id)', async () => {
    const q = uniqueName('b41c');
    await push(q, many(1), 'p1');
    await b.http('DELETE', `/api/v1/resources/queues/${q}`);
    const r = await push(q, many(1), 'p1');
    expect(r.status).toBe(201);
    expect(r.body[0].offset).toBe('1');
    // Transactions resolve partitions through the same cache.
    await b.http('DELETE', `/api/v1/resources/queues/${q}`);
    const t = await b.http('POST', '/api/v1/transaction', { operations: [{ type: 'push', items: [{ queue: q, partition: 'p1', payload: 1 }] }] });
    expect(t.body.success).toBe(true);
    expect(t.body.results[0].offset).toBe('1');
  });
});

describe('consumer groups', () => {
  it('B29 fan-out: every group reads every message in order, independently', async () => {
    const q = uniqueName('b29');
    await push(q, many(100));
    const a = await consumeAll(q, 'A', 30);
    expect(a).toEqual(Array.from({ length: 100 }, (_, i) => i));
    const bGroup = await group('B');
    expect(bGroup.status).toBe(404); // B never touched anything: no cursor row
    const bFirst = await pop(q, 'consumerGroup=B&batch=5');
    expect(bFirst.body.messages.map((m: any) => m.offset)).toEqual(['1', '2', '3', '4', '5']);
    const detail = await b.http('GET', `/api/v1/consumer-groups/B?queue=${q}`);
    expect(detail.body.partitions[0].cursor).toBe('0');
    // Release B's lease by acking what it got, then read the rest.
    await b.http('POST', '/api/v1/ack/batch', {
      consumerGroup: 'B',
      acknowledgments: bFirst.body.messages.map((m: any) => ({ transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId })),
    });
    const rest = await consumeAll(q, 'B', 40);
    expect(rest).toEqual(Array.from({ length: 95 }, (_, i) => i + 5));
    const queueMode = await consumeAll(q, '__QUEUE_MODE__', 100);
    expect(queueMode).toHaveLength(100);
  });

  it('B30 subscription new / now', async () => {
    const q = uniqueName('b30');
    await push(q, many(5));
    expect((await pop(q, 'consumerGroup=N&subscriptionMode=new')).status).toBe(204);
    expect((await pop(q, 'consumerGroup=F&subscriptionFrom=now')).status).toBe(204);
    await push(q, many(3, 5));
    expect(await consumeAll(q, 'N')).toEqual([5, 6, 7]);
    expect(await consumeAll(q, 'F')).toEqual([5, 6, 7]);
    expect(await consumeAll(q, 'All')).toHaveLength(8);
  });

  it('B31 subscription by time is fixed at join', async () => {
    const q = uniqueName('b31');
    await push(q, many(3));
    await push(q, many(2, 3));
    const other = await pop(q, 'consumerGroup=reader&batch=10');
    const t = other.body.messages[2].createdAt;
    const s = await pop(q, `consumerGroup=S&batch=10&subscriptionFrom=${encodeURIComponent(t)}`);
    expect(s.body.messages.map((m: any) => m.offset)).toEqual(['4', '5']);
    await b.http('POST', '/api/v1/ack/batch', {
      consumerGroup: 'S',
      acknowledgments: s.body.messages.map((m: any) => ({ transactionId: m.transactionId, partitionId: m.partitionId })),
    });
    // Later parameters are ignored: deleting the cursor would be a group delete, not a new pop.
    await push(q, many(1, 5));
    const later = await pop(q, 'consumerGroup=S&batch=10&subscriptionMode=all');
    expect(later.body.messages.map((m: any) => m.offset)).toEqual(['6']);
  });

  it('B32 seek: timestamp, toEnd, partition offset, and a seek releases the lease', async () => {
    const q = uniqueName('b32');
    await push(q, many(10));
    expect(await consumeAll(q, 'G')).toHaveLength(10);
    expect((await group('G')).body.partitions.find((p: any) => p.queue === q).cursor).toBe('10');

    const past = await b.http('POST', `/api/v1/consumer-groups/G/queues/${q}/seek`, { timestamp: '2020-01-01T00:00:00Z' });
    expect(past.status).toBe(200);
    expect(past.body).toEqual({ success: true, consumerGroup: 'G', queueName: q, seekToEnd: false, targetTimestamp: '2020-01-01T00:00:00Z', partitionsUpdated: 1 });
    const again = await pop(q, 'consumerGroup=G&batch=3');
    expect(again.body.messages[0].offset).toBe('1');

    // The seek to end releases that lease: its acks are refused.
    const toEnd = await b.http('POST', `/api/v1/consumer-groups/G/queues/${q}/seek`, { toEnd: true });
    expect(toEnd.body).toMatchObject({ seekToEnd: true, targetTimestamp: null, partitionsUpdated: 1 });
    expect((await group('G')).body.partitions.find((p: any) => p.queue === q)).toMatchObject({ cursor: '10', leased: false });
    const stale = await b.http('POST', '/api/v1/ack', {
      consumerGroup: 'G',
      transactionId: again.body.messages[0].transactionId,
      partitionId: again.body.partitionId,
      leaseId: again.body.leaseId,
    });
    expect(stale.body[0]).toMatchObject({ success: true, alreadyAcked: true }); // at or below the cursor now
    expect((await pop(q, 'consumerGroup=G')).status).toBe(204);

    const five = await b.http('POST', `/api/v1/consumer-groups/G/queues/${q}/partitions/Default/seek`, { offset: '5' });
    expect(five.body).toEqual({ success: true, updated: true, cursorMovedTo: '5' });
    const after = await pop(q, 'consumerGroup=G&batch=2');
    expect(after.body.messages.map((m: any) => m.offset)).toEqual(['6', '7']);

    // Seek on a leased partition: the lease ends and the old leaseId's acks get LEASE_EXPIRED.
    const back = await b.http('POST', `/api/v1/consumer-groups/G/queues/${q}/partitions/Default/seek`, { offset: 5 });
    expect(back.body.cursorMovedTo).toBe('5');
    const old = await b.http('POST', '/api/v1/ack', {
      consumerGroup: 'G',
      transactionId: after.body.messages[0].transactionId,
      partitionId: after.body.partitionId,
      leaseId: after.body.leaseId,
    });
    expect(old.body[0]).toMatchObject({ success: false, code: 'LEASE_EXPIRED' });
    const fresh = await pop(q, 'consumerGroup=G&batch=1');
    expect(fresh.body.messages[0].offset).toBe('6');

    // {} = to the end (compat); {timestamp} on one partition.
    expect((await b.http('POST', `/api/v1/consumer-groups/G/queues/${q}/partitions/Default/seek`, {})).body.cursorMovedTo).toBe('10');
    const ts = await b.http('POST', `/api/v1/consumer-groups/G/queues/${q}/partitions/Default/seek`, { timestamp: '2020-01-01T00:00:00Z' });
    expect(ts.body.cursorMovedTo).toBe('0');
  });

  it('B32 seek clears failure records: retryCount starts over', async () => {
    const q = uniqueName('b32f');
    await push(q, many(2));
    const m = await pop(q, 'consumerGroup=G');
    await b.http('POST', '/api/v1/ack', { consumerGroup: 'G', transactionId: m.body.messages[0].transactionId, partitionId: m.body.partitionId, status: 'failed' });
    expect((await pop(q, 'consumerGroup=G')).body.messages[0].retryCount).toBe(1);
    await b.http('POST', `/api/v1/consumer-groups/G/queues/${q}/seek`, { timestamp: '2020-01-01T00:00:00Z' });
    const r = await pop(q, 'consumerGroup=G');
    expect(r.body.messages[0]).toMatchObject({ offset: '1', retryCount: 0 });
    const { rows } = await b.sql.query('select count(*)::int as n from queen.failures where partition_id = $1', [m.body.partitionId]);
    expect(rows[0].n).toBe(0);
  });

  it('X5 unknown queue or partition: 404 and no cursor row created; bad seek bodies → 400', async () => {
    const q = uniqueName('x5');
    const unknownQueue = await b.http('POST', `/api/v1/consumer-groups/G/queues/${q}/seek`, { toEnd: true });
    expect(unknownQueue.status).toBe(404);
    expect(unknownQueue.body.code).toBe('QUEUE_NOT_FOUND');
    expect((await queueInfo(q)).status).toBe(404);
    const unknownQueueP = await b.http('POST', `/api/v1/consumer-groups/G/queues/${q}/partitions/p/seek`, {});
    expect(unknownQueueP.body.code).toBe('QUEUE_NOT_FOUND');

    await push(q, many(1));
    const unknownPart = await b.http('POST', `/api/v1/consumer-groups/Gx/queues/${q}/partitions/nope/seek`, {});
    expect(unknownPart.status).toBe(404);
    expect(unknownPart.body.code).toBe('PARTITION_NOT_FOUND');
    const { rows } = await b.sql.query(`select count(*)::int as n from queen.cursors where consumer_group = 'Gx'`);
    expect(rows[0].n).toBe(0);

    for (const body of [{}, { toEnd: true, timestamp: '2020-01-01T00:00:00Z' }, { toEnd: false }, { timestamp: 'yesterday' }]) {
      const r = await b.http('POST', `/api/v1/consumer-groups/Gx/queues/${q}/seek`, body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.code).toBe('VALIDATION_FAILED');
    }
    for (const body of [{ offset: '5', timestamp: '2020-01-01T00:00:00Z' }, { offset: 'five' }, { offset: '99999999999999999999' }, { offset: '9999999999999999999' }]) {
      const r = await b.http('POST', `/api/v1/consumer-groups/Gx/queues/${q}/partitions/Default/seek`, body);
      expect(r.status, JSON.stringify(body)).toBe(400);
    }
    const after = await b.sql.query(`select count(*)::int as n from queen.cursors where consumer_group = 'Gx'`);
    expect(after.rows[0].n).toBe(0);
  });

  it('B33 delete group: cursors and subscriptions go; the group reads history again', async () => {
    const q = uniqueName('b33');
    await push(q, many(4));
    expect((await consumeAll(q, 'G33'))).toHaveLength(4);
    const del = await b.http('DELETE', '/api/v1/consumer-groups/G33');
    expect(del.status).toBe(200);
    expect(del.body).toMatchObject({ success: true, consumerGroup: 'G33', metadataDeleted: true });
    expect(del.body.deletedPartitions).toBeGreaterThanOrEqual(1);
    expect((await group('G33')).status).toBe(404);
    expect(await consumeAll(q, 'G33')).toEqual([0, 1, 2, 3]);

    // Idempotent; the per-queue form leaves other queues alone; deleteMetadata=false keeps the subscription.
    const q2 = uniqueName('b33b');
    await push(q2, many(2));
    expect(await consumeAll(q2, 'G33')).toHaveLength(2);
    const one = await b.http('DELETE', `/api/v1/consumer-groups/G33/queues/${q2}?deleteMetadata=false`);
    expect(one.body).toEqual({ success: true, consumerGroup: 'G33', deletedPartitions: 1, metadataDeleted: false });
    const detail = await group('G33');
    expect(detail.body.partitions.map((p: any) => p.queue)).toEqual([q]);
    expect(detail.body.subscriptions.map((s: any) => s.queue).sort()).toEqual([q, q2].sort());
    const twice = await b.http('DELETE', `/api/v1/consumer-groups/G33/queues/${q2}`);
    expect(twice.body.deletedPartitions).toBe(0);
    const unknown = await b.http('DELETE', `/api/v1/consumer-groups/G33/queues/${uniqueName('none')}`);
    expect(unknown.body.deletedPartitions).toBe(0);
    expect((await group('G33')).body.partitions.map((p: any) => p.queue)).toEqual([q]);
  });

  it('B33 delete group ends leases and failure records but keeps DLQ entries', async () => {
    const q = uniqueName('b33l');
    await b.http('POST', '/api/v1/configure', { queue: q, options: { retryLimit: 0 } });
    await push(q, many(3));
    const first = await pop(q, 'consumerGroup=L');
    await b.http('POST', '/api/v1/ack', { consumerGroup: 'L', transactionId: first.body.messages[0].transactionId, partitionId: first.body.partitionId, status: 'failed' });
    const second = await pop(q, 'consumerGroup=L');
    expect(second.body.messages[0].offset).toBe('2');
    await b.http('DELETE', '/api/v1/consumer-groups/L');
    const { rows } = await b.sql.query(`select count(*)::int as n from queen.cursors where consumer_group = 'L'`);
    expect(rows[0].n).toBe(0);
    expect((await b.http('GET', `/api/v1/dlq?queue=${q}&consumerGroup=L`)).body.total).toBe(1);
    const redo = await pop(q, 'consumerGroup=L&batch=10');
    expect(redo.body.messages.map((m: any) => m.offset)).toEqual(['1', '2', '3']);
  });

  it('B45 observability: group list lag and DLQ pagination', async () => {
    const q = uniqueName('b45');
    await push(q, many(10));
    const got = await pop(q, 'consumerGroup=A45&batch=4');
    await b.http('POST', '/api/v1/ack/batch', {
      consumerGroup: 'A45',
      acknowledgments: got.body.messages.map((m: any) => ({ transactionId: m.transactionId, partitionId: m.partitionId })),
    });
    const list = await b.http('GET', '/api/v1/consumer-groups');
    expect(list.status).toBe(200);
    const a = list.body.find((g: any) => g.name === 'A45');
    expect(a).toMatchObject({ totalLag: 6, partitionsWithLag: 1, topics: [q], queues: [{ queue: q, lag: 6 }], members: 0, state: 'Stable' });
    expect(a.maxTimeLag).toBeGreaterThanOrEqual(0);
    const detail = await group('A45');
    expect(detail.body.partitions[0]).toMatchObject({ cursor: '4', headOffset: '10', lag: 6 });

    // A live lease is a member; an old pending message makes the group Lagging.
    await pop(q, 'consumerGroup=A45');
    await b.sql.query(`update queen.messages set created_at = created_at - interval '2 minutes' where partition_id = $1`, [got.body.partitionId]);
    const lagging = (await b.http('GET', '/api/v1/consumer-groups')).body.find((g: any) => g.name === 'A45');
    expect(lagging).toMatchObject({ members: 1, state: 'Lagging' });
    expect(lagging.maxTimeLag).toBeGreaterThanOrEqual(119);
    await b.sql.query(`update queen.cursors set last_acked_at = now() - interval '2 hours' where consumer_group = 'A45'`);
    // Written by SQL, not through a route: counted in the listing totals at their next recount (listing-totals.ts).
    await b.ctx.totals.flush();
    expect((await b.http('GET', '/api/v1/consumer-groups')).body.find((g: any) => g.name === 'A45').state).toBe('Dead');

    // 5 DLQ entries, newest failure first.
    const d = uniqueName('b45d');
    await push(d, many(5));
    for (let i = 0; i < 5; i++) {
      const m = await pop(d, 'consumerGroup=D45');
      const r = await b.http('POST', '/api/v1/ack', { consumerGroup: 'D45', transactionId: m.body.messages[0].transactionId, partitionId: m.body.partitionId, status: 'dlq', error: `e${i}` });
      expect(r.body[0].dlq).toBe(true);
    }
    const page = await b.http('GET', `/api/v1/dlq?queue=${d}&limit=2`);
    expect(page.status).toBe(200);
    expect(page.body.total).toBe(5);
    expect(page.body.pagination).toEqual({ limit: 2, offset: 0 });
    expect(page.body.messages.map((m: any) => m.errorMessage)).toEqual(['e4', 'e3']);
    expect(page.body.messages[0]).toMatchObject({ queue: d, partition: 'Default', consumerGroup: 'D45', offset: '5', data: { i: 4 }, retryCount: 0 });
    const next = await b.http('GET', `/api/v1/dlq?queue=${d}&limit=2&offset=4`);
    expect(next.body.messages.map((m: any) => m.offset)).toEqual(['1']);
    const past = await b.http('GET', `/api/v1/dlq?queue=${d}&limit=2&offset=10`);
    expect(past.body).toMatchObject({ messages: [], total: 5 });
    expect((await b.http('GET', `/api/v1/dlq?queue=${d}&consumerGroup=other`)).body.total).toBe(0);
    expect((await b.http('GET', `/api/v1/dlq?limit=0`)).status).toBe(400);
    expect((await b.http('GET', `/api/v1/dlq?offset=-1`)).status).toBe(400);
  });
});

describe('maintenance', () => {
  it('B42 pop pause: pops answer 204 paused, pushes still land, disable delivers', async () => {
    const q = uniqueName('b42');
    expect((await b.http('GET', '/api/v1/system/maintenance')).body).toEqual({ maintenanceMode: false, popMaintenanceMode: false });
    const on = await b.http('POST', '/api/v1/system/maintenance/pop', { enabled: true });
    expect(on.body).toEqual({ popMaintenanceMode: true });
    try {
      expect((await push(q, many(2))).status).toBe(201);
      const paused = await pop(q);
      expect(paused.status).toBe(204);
      expect(paused.headers.get('x-queen-pop-paused')).toBe('true');
      expect((await b.http('GET', '/api/v1/system/maintenance')).body.popMaintenanceMode).toBe(true);
      // The flag lives in PostgreSQL: a second broker on the same database pauses too.
      const other = await startTestBroker({ databaseUrl: b.databaseUrl });
      try {
        expect((await other.http('GET', `/api/v1/pop/queue/${q}`)).status).toBe(204);
      } finally {
        await other.stop();
      }
    } finally {
      const off = await b.http('POST', '/api/v1/system/maintenance/pop', { enabled: false });
      expect(off.body).toEqual({ popMaintenanceMode: false });
    }
    const got = await pop(q, 'batch=10');
    expect(got.status).toBe(200);
    expect(got.body.messages).toHaveLength(2);
    expect((await b.http('POST', '/api/v1/system/maintenance/pop', { enabled: 'yes' })).status).toBe(400);
    expect((await b.http('POST', '/api/v1/system/maintenance/pop', {})).status).toBe(400);
    expect((await b.http('POST', '/api/v1/system/maintenance/run', { tasks: ['vacuum'] })).status).toBe(400);
  });
});

describe('openapi', () => {
  it('every route of this feature is listed in /openapi.json', async () => {
    const r = await b.http('GET', '/openapi.json');
    expect(r.status).toBe(200);
    const paths = r.body.paths;
    expect(Object.keys(paths['/api/v1/configure'])).toContain('post');
    expect(Object.keys(paths['/api/v1/resources/queues/{queue}'])).toEqual(expect.arrayContaining(['get', 'delete']));
    expect(Object.keys(paths['/api/v1/consumer-groups'])).toContain('get');
    expect(Object.keys(paths['/api/v1/consumer-groups/{group}'])).toEqual(expect.arrayContaining(['get', 'delete']));
    for (const p of [
      '/api/v1/consumer-groups/{group}/queues/{queue}',
      '/api/v1/consumer-groups/{group}/queues/{queue}/seek',
      '/api/v1/consumer-groups/{group}/queues/{queue}/partitions/{partition}/seek',
      '/api/v1/dlq',
      '/api/v1/transaction',
      '/api/v1/system/maintenance',
      '/api/v1/system/maintenance/pop',
      '/api/v1/system/maintenance/run',
    ]) {
      expect(paths[p], p).toBeDefined();
    }
    expect(paths['/api/v1/system/maintenance'].get['x-queen-level']).toBe('admin');
  });
});
