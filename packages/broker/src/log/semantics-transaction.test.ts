import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleep, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { QueenError } from '@queen-mq/protocol';
import { setTransactionKv } from '../context/context.js';

// POST /api/v1/transaction (PROTOCOL §5.7): pushes and acks in one PostgreSQL
// transaction, over real HTTP on a real PostgreSQL.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

const push = (queue: string, items: Record<string, unknown>[], partition = 'Default') =>
  b.http('POST', '/api/v1/push', { items: items.map((i) => ({ queue, partition, ...i })) });
const pop = (queue: string, params = '') => b.http('GET', `/api/v1/pop/queue/${queue}?${params}`);
const txn = (body: unknown) => b.http('POST', '/api/v1/transaction', body);
const head = async (queue: string, partition = 'Default') => {
  const r = await b.http('GET', `/api/v1/resources/queues/${queue}`);
  return r.status === 404 ? null : r.body.partitions.find((p: any) => p.name === partition)?.headOffset;
};
const cursor = async (g: string, queue: string) =>
  (await b.http('GET', `/api/v1/consumer-groups/${g}?queue=${queue}`)).body.partitions?.[0]?.cursor ?? null;

describe('transactions', () => {
  it('B34 happy path: push and ack commit together', async () => {
    const a = uniqueName('b34a');
    const bq = uniqueName('b34b');
    await push(a, [{ payload: { v: 1 } }]);
    const m = (await pop(a)).body.messages[0];
    expect(m.data).toEqual({ v: 1 });
    const r = await txn({
      operations: [
        { type: 'push', items: [{ queue: bq, payload: { v: 2 } }] },
        { type: 'ack', transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId },
      ],
    });
    expect(r.status).toBe(200);
    expect(r.body.success).toBe(true);
    expect(r.body.transactionId).toMatch(/^[0-9a-f-]{36}$/);
    expect(r.body.results[0]).toMatchObject({ index: 0, type: 'push', success: true, status: 'queued', queueName: bq, offset: '1' });
    expect(r.body.results[1]).toMatchObject({ index: 1, type: 'ack', success: true, transactionId: m.transactionId, dlq: false });
    const got = await pop(bq, 'batch=10');
    expect(got.body.messages.map((x: any) => x.data)).toEqual([{ v: 2 }]);
    expect((await pop(a)).status).toBe(204);

    // An ack with consumerGroup moves only that group.
    await push(a, [{ payload: { v: 3 } }]);
    const g1 = (await pop(a, 'consumerGroup=G1&batch=10')).body.messages;
    const last = g1[g1.length - 1];
    const r2 = await txn({ operations: [{ type: 'ack', transactionId: last.transactionId, partitionId: last.partitionId, consumerGroup: 'G1' }] });
    expect(r2.body.success).toBe(true);
    expect(await cursor('G1', a)).toBe('2');
    expect(await cursor('__QUEUE_MODE__', a)).toBe('1');
  });

  it('B35 rollback: a failing ack undoes the pushes and the valid acks', async () => {
    const a = uniqueName('b35a');
    const bq = uniqueName('b35b');
    await b.http('POST', '/api/v1/configure', { queue: a, options: { leaseTime: 1 } });
    await push(bq, [{ payload: 'before' }]);
    await push(a, [{ payload: 'm' }]);
    const m = (await pop(a)).body.messages[0];
    const r = await txn({
      operations: [
        { type: 'push', items: [{ queue: bq, payload: 'x' }] },
        { type: 'ack', transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId },
        { type: 'ack', transactionId: 'nope', partitionId: m.partitionId },
      ],
    });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ success: false, code: 'MESSAGE_NOT_FOUND', results: [] });
    expect(typeof r.body.error).toBe('string');
    expect(await head(bq)).toBe('1');
    expect(await cursor('__QUEUE_MODE__', a)).toBe('0');
    await sleep(1200);
    const again = await pop(a);
    expect(again.body.messages[0]).toMatchObject({ transactionId: m.transactionId, offset: '1' });
  });

  it('B3 a rolled-back transaction push leaves no gap in the offsets', async () => {
    const q = uniqueName('b3');
    await push(q, [{ payload: 1 }, { payload: 2 }, { payload: 3 }], 'p1');
    const pid = (await b.http('GET', `/api/v1/resources/queues/${q}`)).body.partitions[0].id;
    const r = await txn({
      operations: [
        { type: 'push', items: [{ queue: q, partition: 'p1', payload: 'rolled back' }] },
        { type: 'ack', transactionId: 'missing', partitionId: pid },
      ],
    });
    expect(r.body.success).toBe(false);
    const next = await push(q, [{ payload: 4 }], 'p1');
    expect(next.body[0].offset).toBe('4');
  });

  it('B36 a duplicate push in a transaction is reported, not an abort', async () => {
    const a = uniqueName('b36a');
    const bq = uniqueName('b36b');
    const original = await push(bq, [{ payload: 'orig', transactionId: 'T' }]);
    await push(a, [{ payload: 'm' }]);
    const m = (await pop(a)).body.messages[0];
    const r = await txn({
      operations: [
        { type: 'push', items: [{ queue: bq, payload: 'again', transactionId: 'T' }, { queue: bq, payload: 'new', transactionId: 'T2' }] },
        { type: 'ack', transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId },
      ],
    });
    expect(r.body.success).toBe(true);
    expect(r.body.results[0]).toMatchObject({ index: 0, status: 'duplicate', messageId: original.body[0].message_id, offset: '1', transactionId: 'T' });
    expect(r.body.results[1]).toMatchObject({ index: 1, status: 'queued', offset: '2', transactionId: 'T2' });
    expect(r.body.results[2]).toMatchObject({ index: 2, type: 'ack', success: true });
    expect(await cursor('__QUEUE_MODE__', a)).toBe('1');
    expect(await head(bq)).toBe('2');
  });

  it('B37 a failed ack in a transaction dead-letters at once', async () => {
    const a = uniqueName('b37');
    await b.http('POST', '/api/v1/configure', { queue: a, options: { retryLimit: 5 } });
    await push(a, [{ payload: 'poison' }]);
    const m = (await pop(a)).body.messages[0];
    const r = await txn({ operations: [{ type: 'ack', transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status: 'failed', error: 'bad' }] });
    expect(r.body.success).toBe(true);
    expect(r.body.results[0]).toMatchObject({ type: 'ack', success: true, dlq: true });
    const dlq = await b.http('GET', `/api/v1/dlq?queue=${a}`);
    expect(dlq.body.messages[0]).toMatchObject({ transactionId: m.transactionId, errorMessage: 'bad', data: 'poison' });
    expect((await pop(a)).status).toBe(204);
  });

  it('a transaction may ack a message it pushed earlier in the same request', async () => {
    const q = uniqueName('self');
    const r = await txn({
      operations: [
        { type: 'push', items: [{ queue: q, payload: 1, transactionId: 'own' }] },
        { type: 'ack', transactionId: 'own', partitionId: '00000000-0000-0000-0000-000000000000' },
      ],
    });
    expect(r.body).toMatchObject({ success: false, code: 'MESSAGE_NOT_FOUND' });
    expect(await head(q)).toBe('0'); // the queue was created before, the push rolled back
    const pid = (await b.http('GET', `/api/v1/resources/queues/${q}`)).body.partitions[0].id;
    const ok = await txn({
      operations: [
        { type: 'push', items: [{ queue: q, payload: 1, transactionId: 'own' }] },
        { type: 'ack', transactionId: 'own', partitionId: pid, consumerGroup: 'G' },
      ],
    });
    expect(ok.body.success).toBe(true);
    expect(await cursor('G', q)).toBe('1');
  });

  it('a stale lease aborts the whole transaction with LEASE_EXPIRED', async () => {
    const q = uniqueName('stale');
    const out = uniqueName('stale-out');
    await push(q, [{ payload: 1 }]);
    const m = (await pop(q)).body.messages[0];
    const r = await txn({
      operations: [
        { type: 'push', items: [{ queue: out, payload: 'x' }] },
        { type: 'ack', transactionId: m.transactionId, partitionId: m.partitionId, leaseId: '00000000-0000-7000-8000-000000000000' },
      ],
    });
    expect(r.body).toMatchObject({ success: false, code: 'LEASE_EXPIRED', results: [] });
    expect(await head(out)).toBe('0');
  });

  it('concurrent mixed transactions over shared partitions never deadlock', async () => {
    const q = uniqueName('mix');
    const parts = ['p0', 'p1', 'p2', 'p3'];
    for (const p of parts) await push(q, Array.from({ length: 10 }, (_, i) => ({ payload: i })), p);
    const info = (await b.http('GET', `/api/v1/resources/queues/${q}`)).body.partitions;
    const ids = Object.fromEntries(info.map((p: any) => [p.name, p.id]));
    const { rows } = await b.sql.query('select partition_id, coalesce(transaction_id, id::text) as transaction_id, msg_offset from queen.messages where partition_id = any($1) order by msg_offset', [
      Object.values(ids),
    ]);
    const requests = Array.from({ length: 24 }, (_, i) => {
      const order = i % 2 === 0 ? parts : [...parts].reverse();
      const acks = rows.filter((r: any) => Number(r.msg_offset) === (i % 10) + 1).map((r: any) => ({
        type: 'ack',
        transactionId: r.transaction_id,
        partitionId: r.partition_id,
        consumerGroup: `g${i % 3}`,
      }));
      return txn({
        operations: [
          { type: 'push', items: order.map((p) => ({ queue: q, partition: p, payload: { i } })) },
          ...(i % 2 === 0 ? acks : [...acks].reverse()),
        ],
      });
    });
    const results = await Promise.all(requests);
    expect(results.map((r) => r.status)).toEqual(results.map(() => 200));
    expect(results.every((r) => r.body.success)).toBe(true);
    for (const p of parts) expect(await head(q, p)).toBe('34');
  });
});

describe('cursor creation order', () => {
  it('a first pop never creates a cursor while holding a claimed one (no deadlock with an ack creating cursors in id order)', async () => {
    // Partitions L < H by id, H holding the older message: a pop claims H
    // first. A concurrent first ack of the group has created L's cursor
    // (uncommitted) and creates H's next, as acks do: in id order. A pop that
    // created L's cursor only after claiming H would wait on the ack while
    // the ack waits on H: a deadlock. Cursors are created first, in id order.
    // (claimOrder 'oldest': the pop claims by oldest message, H before L.)
    const q = uniqueName('curs');
    expect((await b.http('POST', '/api/v1/configure', { queue: q, options: { claimOrder: 'oldest' } })).status).toBe(200);
    const { rows } = await b.sql.query('select partition_id, queue_id from queen.ensure_partitions_v1($1::jsonb) order by partition_id', [
      JSON.stringify([{ queue: q, partition: 'a' }, { queue: q, partition: 'b' }]),
    ]);
    const [low, high] = rows.map((r: any) => r.partition_id as string);
    const names = Object.fromEntries(((await b.http('GET', `/api/v1/resources/queues/${q}`)).body.partitions as any[]).map((p) => [p.id, p.name]));
    await push(q, [{ payload: 'older' }], names[high]);
    await push(q, [{ payload: 'newer' }], names[low]);

    const ack = await b.sql.connect();
    const popper = await b.sql.connect();
    try {
      await ack.query('begin');
      await ack.query("insert into queen.cursors (partition_id, consumer_group) values ($1, 'g')", [low]);
      const popped = popper.query("select partition_id from queen.log_pop_v4($1, null, 'g', 2, 10, false, gen_random_uuid())", [rows[0].queue_id]);
      await sleep(300);
      await ack.query("insert into queen.cursors (partition_id, consumer_group) values ($1, 'g') on conflict do nothing", [high]);
      await ack.query("select 1 from queen.cursors where partition_id = any($1) and consumer_group = 'g' order by partition_id for update", [[low, high]]);
      await ack.query('commit');
      expect((await popped).rows.map((r: any) => r.partition_id)).toEqual([high, low]);
    } finally {
      await ack.query('rollback').catch(() => undefined);
      ack.release();
      popper.release();
    }
  });
});

describe('X10 bad transactions', () => {
  it('X10 bad shapes → 400 VALIDATION_FAILED and nothing applied', async () => {
    const q = uniqueName('x10');
    const cases: unknown[] = [
      {},
      { operations: [] },
      { operations: [], kv: [], timers: [] },
      { operations: [{ type: 'merge' }] },
      { operations: [{ type: 'push', items: [{ queue: q, payload: 1 }] }, { type: 'ack', transactionId: 't' }] },
      { operations: [{ type: 'push', items: [{ queue: q, traceId: 'abc' }] }] },
      { operations: [{ type: 'ack', transactionId: 't', partitionId: '00000000-0000-0000-0000-000000000000', status: 'done' }] },
      { operations: 'push' },
      { kv: [{ op: 'explode', namespace: 'n', key: 'k' }] },
      { kv: [{ op: 'set', namespace: 'bad ns!', key: 'k', value: 1 }] },
      { kv: [{ op: 'incr', namespace: 'n', key: 'k', by: 1.5 }] },
      { timers: [{ queue: q, payload: 1 }] },
      { timers: [{ queue: q, payload: 1, delayMs: 10, fireAt: '2030-01-01T00:00:00Z' }] },
    ];
    for (const body of cases) {
      const r = await txn(body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.code).toBe('VALIDATION_FAILED');
      expect(r.body.details.length).toBeGreaterThan(0);
    }
    expect((await b.http('GET', `/api/v1/resources/queues/${q}`)).status).toBe(404);
    const json = await b.http('POST', '/api/v1/transaction', '{"operations":[');
    expect(json.body.code).toBe('INVALID_JSON');
  });

  it('X10 valid kv is refused clearly on a broker without the KV plugin; nothing applied', async () => {
    const q = uniqueName('x10kv');
    const kv = await txn({ operations: [{ type: 'push', items: [{ queue: q, payload: 1 }] }], kv: [{ op: 'incr', namespace: 'n', key: 'k', max: 5 }] });
    expect(kv.status).toBe(400);
    expect(kv.body.code).toBe('VALIDATION_FAILED');
    expect(kv.body.details).toEqual([{ field: 'body.kv', message: 'kv is not enabled on this broker' }]);
    expect((await b.http('GET', `/api/v1/resources/queues/${q}`)).status).toBe(404);
  });

  it('X10 bad acks: status "done" → 400; a batch with one item lacking partitionId applies nothing', async () => {
    const q = uniqueName('x10a');
    await push(q, [{ payload: 1 }, { payload: 2 }]);
    const got = (await pop(q, 'batch=2')).body.messages;
    const single = await b.http('POST', '/api/v1/ack', { transactionId: got[0].transactionId, partitionId: got[0].partitionId, status: 'done' });
    expect(single.status).toBe(400);
    expect(single.body.details[0].field).toBe('body.status');
    const batch = await b.http('POST', '/api/v1/ack/batch', {
      acknowledgments: [{ transactionId: got[0].transactionId, partitionId: got[0].partitionId }, { transactionId: got[1].transactionId }],
    });
    expect(batch.status).toBe(400);
    expect(batch.body.details[0].field).toBe('body.acknowledgments[1].partitionId');
    expect(await cursor('__QUEUE_MODE__', q)).toBe('0');
  });
});

describe('kv/timers extension point', () => {
  it('a composed kv extension runs inside the transaction: its abort rolls the pushes back', async () => {
    const x = await startTestBroker({ databaseUrl: b.databaseUrl });
    try {
      await x.sql.query('create table if not exists public.kv_probe (k text primary key)');
      setTransactionKv(x.ctx, async (client, ops) => {
        const out = [];
        for (const op of ops) {
          if (op.key === 'conflict') throw new QueenError('VERSION_CONFLICT', undefined, { extra: { currentVersion: 7 } });
          await client.query('insert into public.kv_probe (k) values ($1)', [op.key]);
          out.push({ op: op.op, namespace: op.namespace, key: op.key, applied: true });
        }
        return out;
      });
      const q = uniqueName('ext');
      const ok = await x.http('POST', '/api/v1/transaction', {
        operations: [{ type: 'push', items: [{ queue: q, payload: 1 }] }],
        kv: [{ op: 'set', namespace: 'n', key: 'a', value: 1 }],
      });
      expect(ok.body).toMatchObject({ success: true, kvResults: [{ op: 'set', key: 'a', applied: true }], timerResults: [] });
      const bad = await x.http('POST', '/api/v1/transaction', {
        operations: [{ type: 'push', items: [{ queue: q, payload: 2 }] }],
        kv: [{ op: 'set', namespace: 'n', key: 'b', value: 1 }, { op: 'delete', namespace: 'n', key: 'conflict' }],
      });
      expect(bad.body).toMatchObject({ success: false, code: 'VERSION_CONFLICT', currentVersion: 7, results: [] });
      expect(await head(q)).toBe('1');
      const { rows } = await x.sql.query('select k from public.kv_probe order by k');
      expect(rows.map((r: any) => r.k)).toEqual(['a']);
      // Another broker without the extension still refuses kv.
      expect((await txn({ kv: [{ op: 'set', namespace: 'n', key: 'c', value: 1 }] })).status).toBe(400);
    } finally {
      await x.stop();
    }
  });
});
