import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { eventually, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// DLQ replay (POST /api/v1/dlq/requeue beyond ids): in bulk by queue, group,
// error text and failure time, paged; into another queue; every message
// re-pushed with transactionId `dlq:<id>`, so a repeated or crashed replay
// never queues a message twice.

const KEY = 'b2'.repeat(32);
let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker({ config: { encryptionKey: KEY } });
});
afterAll(async () => b?.stop());

const requeue = (body: Record<string, unknown>) => b.http('POST', '/api/v1/dlq/requeue', body);
const dlq = async (queue: string) => (await b.http('GET', `/api/v1/dlq?queue=${queue}`)).body;
const head = async (queue: string) => (await b.sql.query('select name, head_offset::int as h from queen.partitions where queue_name = $1 order by name', [queue])).rows;

/** Pushes one message per error text to queue/p, and dead-letters each for `group` with that text as its error. */
async function deadLetter(queue: string, errors: string[], group = 'g'): Promise<any[]> {
  const pushed = await b.http('POST', '/api/v1/push', { items: errors.map((error, i) => ({ queue, partition: 'p', payload: { i, error } })) });
  expect(pushed.status).toBe(201);
  const popped = await b.http('GET', `/api/v1/pop/queue/${queue}?consumerGroup=${group}&batch=${errors.length}`);
  expect(popped.body.messages).toHaveLength(errors.length);
  for (const m of popped.body.messages) {
    const r = await b.http('POST', '/api/v1/ack', { transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status: 'dlq', consumerGroup: group, error: m.data.error });
    expect(r.body[0]).toMatchObject({ success: true, dlq: true });
  }
  return popped.body.messages;
}

describe('DLQ replay', () => {
  it('in bulk by queue and error text, paged oldest failure first, with remaining; what does not match stays', async () => {
    const q = uniqueName('replay-bulk');
    const dead = await deadLetter(q, ['Timeout after 5 s', 'bad input', 'timeout after 9 s', 'TIMEOUT', 'schema mismatch']);
    // Failure times in a known order: the fourth failed first.
    for (const [i, at] of [[3, '2026-01-01T00:00:00Z'], [0, '2026-01-02T00:00:00Z'], [2, '2026-01-03T00:00:00Z'], [1, '2026-01-04T00:00:00Z'], [4, '2026-01-05T00:00:00Z']] as const) {
      await b.sql.query('update queen.dlq d set failed_at = $2 from queen.messages m where m.partition_id = d.partition_id and m.msg_offset = d.msg_offset and m.id = $1', [dead[i].id, at]);
    }
    const page1 = await requeue({ queue: q, errorContains: 'timeout', limit: 2 });
    expect(page1.status).toBe(200);
    expect(page1.body).toMatchObject({ success: true, requeued: 2, remaining: 1 });
    expect(page1.body.results.map((r: any) => [r.id, r.status, r.offset, r.transactionId])).toEqual([
      [dead[3].id, 'queued', '6', `dlq:${dead[3].id}`],
      [dead[0].id, 'queued', '7', `dlq:${dead[0].id}`],
    ]);
    const page2 = await requeue({ queue: q, errorContains: 'timeout', limit: 2 });
    expect(page2.body).toMatchObject({ requeued: 1, remaining: 0, results: [{ id: dead[2].id, offset: '8', entriesDeleted: 1 }] });
    // A repeated replay finds nothing more: nothing queued twice.
    expect((await requeue({ queue: q, errorContains: 'timeout' })).body).toEqual({ success: true, requeued: 0, refused: 0, results: [], remaining: 0 });
    expect(new Set((await dlq(q)).messages.map((m: any) => m.errorMessage))).toEqual(new Set(['bad input', 'schema mismatch']));
    expect(await head(q)).toEqual([{ name: 'p', h: 8 }]);
    // The replayed messages, with their payloads and deterministic transactionIds.
    const again = await b.http('GET', `/api/v1/pop/queue/${q}?consumerGroup=g&batch=10`);
    expect(again.body.messages.map((m: any) => [m.data.error, m.transactionId])).toEqual([
      ['TIMEOUT', `dlq:${dead[3].id}`],
      ['Timeout after 5 s', `dlq:${dead[0].id}`],
      ['timeout after 9 s', `dlq:${dead[2].id}`],
    ]);
  });

  it('in bulk by failure time range and consumer group', async () => {
    const q = uniqueName('replay-time');
    const g1 = await deadLetter(q, ['a', 'b', 'c'], 'g1');
    await deadLetter(q, ['d'], 'g2');
    await b.sql.query(
      `update queen.dlq d set failed_at = '2026-03-01T00:00:00Z'::timestamptz + (m.payload->>'i')::int * interval '1 hour'
         from queen.messages m where m.partition_id = d.partition_id and m.msg_offset = d.msg_offset and d.consumer_group = 'g1' and m.payload->>'error' in ('a', 'b', 'c')`,
    );
    const res = await requeue({ queue: q, consumerGroup: 'g1', failedAfter: '2026-03-01T00:30:00Z', failedBefore: '2026-03-01T02:00:00Z' });
    expect(res.body).toMatchObject({ requeued: 1, remaining: 0, results: [{ id: g1[1].id, entriesDeleted: 1 }] });
    // (g2 dead-lettered the queue's first message, 'a'.)
    expect((await dlq(q)).messages.map((m: any) => `${m.consumerGroup}:${m.errorMessage}`).sort()).toEqual(['g1:a', 'g1:c', 'g2:a']);
    // consumerGroup alone is a bulk filter too.
    expect((await requeue({ consumerGroup: 'g2', queue: q })).body).toMatchObject({ requeued: 1, remaining: 0 });
  });

  it('into another queue (same partition name, or targetPartition), which it creates; the source partition gets nothing', async () => {
    const q = uniqueName('replay-src');
    const target = uniqueName('replay-dst');
    const [first, second] = await deadLetter(q, ['x', 'y']);
    const one = await requeue({ ids: [first.id], targetQueue: target });
    expect(one.body.results[0]).toMatchObject({ success: true, queue: target, partition: 'p', offset: '1', status: 'queued', transactionId: `dlq:${first.id}` });
    const two = await requeue({ ids: [second.id], targetQueue: target, targetPartition: 'elsewhere' });
    expect(two.body.results[0]).toMatchObject({ queue: target, partition: 'elsewhere', offset: '1' });
    expect(await head(q)).toEqual([{ name: 'p', h: 2 }]);
    expect(await head(target)).toEqual([
      { name: 'elsewhere', h: 1 },
      { name: 'p', h: 1 },
    ]);
    const popped = await b.http('GET', `/api/v1/pop/queue/${target}/partition/p`);
    expect(popped.body.messages[0]).toMatchObject({ data: { i: 0, error: 'x' }, transactionId: `dlq:${first.id}`, retryCount: 0 });
    expect((await dlq(q)).total).toBe(0);
  });

  it("a message dead-lettered by two groups and replayed per group is queued once: the second replay answers duplicate", async () => {
    const q = uniqueName('replay-dup');
    const [dead] = await deadLetter(q, ['boom'], 'g1');
    const popped = await b.http('GET', `/api/v1/pop/queue/${q}?consumerGroup=g2`);
    await b.http('POST', '/api/v1/ack', { transactionId: dead.transactionId, partitionId: dead.partitionId, leaseId: popped.body.leaseId, status: 'dlq', consumerGroup: 'g2', error: 'boom' });
    const first = await requeue({ ids: [dead.id], consumerGroup: 'g1' });
    expect(first.body.results[0]).toMatchObject({ status: 'queued', offset: '2', entriesDeleted: 1 });
    const second = await requeue({ ids: [dead.id], consumerGroup: 'g2' });
    expect(second.body).toMatchObject({ requeued: 1, results: [{ success: true, status: 'duplicate', offset: '2', messageId: first.body.results[0].messageId, entriesDeleted: 1 }] });
    expect(await head(q)).toEqual([{ name: 'p', h: 2 }]);
    expect((await dlq(q)).total).toBe(0);
    // A third requeue of the same id: no entry left (requeued: 0), as before.
    expect((await requeue({ ids: [dead.id] })).body).toMatchObject({ requeued: 0, results: [{ success: false, code: 'MESSAGE_NOT_FOUND', status: null }] });
  });

  it('a replay that dies mid-transaction leaves the entry and pushes nothing; running it again queues the message once', async () => {
    const q = uniqueName('replay-crash');
    const [dead] = await deadLetter(q, ['later']);
    // Hold the partition's row lock so the replay's transaction waits, then kill its backend.
    const holder = new pg.Client({ connectionString: b.databaseUrl });
    await holder.connect();
    try {
      await holder.query('begin');
      await holder.query('select 1 from queen.partitions where queue_name = $1 for update', [q]);
      const replay = requeue({ ids: [dead.id] });
      const pid = await eventually(async () => {
        // (Asked outside the holder's transaction: pg_stat_activity is a snapshot per transaction.)
        const { rows } = await b.sql.query(
          "select pid from pg_stat_activity where wait_event_type = 'Lock' and query like '%for update%' and datname = current_database()",
        );
        return rows[0]?.pid as number | undefined;
      });
      await holder.query('select pg_terminate_backend($1)', [pid]);
      expect((await replay).status).toBeGreaterThanOrEqual(500);
      await holder.query('rollback');
    } finally {
      await holder.end();
    }
    expect((await dlq(q)).total).toBe(1);
    expect(await head(q)).toEqual([{ name: 'p', h: 1 }]);
    const again = await requeue({ ids: [dead.id] });
    expect(again.body).toMatchObject({ requeued: 1, results: [{ status: 'queued', offset: '2' }] });
    expect(await head(q)).toEqual([{ name: 'p', h: 2 }]);
  });

  it('into an encryptionEnabled queue from a plaintext one: stored encrypted, popped as plaintext', async () => {
    const q = uniqueName('replay-plain');
    const target = uniqueName('replay-enc');
    expect((await b.http('POST', '/api/v1/configure', { queue: target, options: { encryptionEnabled: true } })).status).toBe(200);
    await deadLetter(q, ['secret']);
    expect((await requeue({ queue: q, targetQueue: target })).body).toMatchObject({ requeued: 1, remaining: 0 });
    const { rows } = await b.sql.query('select m.payload, m.encrypted is not null as enc from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1', [target]);
    expect(rows).toEqual([{ payload: null, enc: true }]);
    expect((await b.http('GET', `/api/v1/pop/queue/${target}`)).body.messages[0].data).toEqual({ i: 0, error: 'secret' });
  });

  it('bad bodies are 400 VALIDATION_FAILED naming the field', async () => {
    const id = '00000000-0000-7000-8000-000000000001';
    for (const [body, field] of [
      [{}, 'body.ids'],
      [{ ids: [id], queue: 'q' }, 'body.queue'],
      [{ ids: [id], errorContains: 'x' }, 'body.errorContains'],
      [{ queue: 'q', targetPartition: 'p' }, 'body.targetPartition'],
      [{ queue: 'q', failedBefore: 'yesterday' }, 'body.failedBefore'],
      [{ queue: 'q', limit: 1001 }, 'body.limit'],
      [{ queue: 'q', targetQueue: '' }, 'body.targetQueue'],
    ] as const) {
      const res = await requeue(body);
      expect([res.status, res.body.code], JSON.stringify(body)).toEqual([400, 'VALIDATION_FAILED']);
      expect(res.body.details.map((d: any) => d.field), JSON.stringify(body)).toContain(field);
    }
  });
});
