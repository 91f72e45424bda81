import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// DLQ requeue and delete (extension routes beside GET /api/v1/dlq) over real
// HTTP: requeue re-pushes through the allocator and removes the entries in
// one transaction; delete removes entries and leaves the log alone.

const KEY = 'a1'.repeat(32);
let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker({ config: { encryptionKey: KEY } });
});
afterAll(async () => b?.stop());

const push = (queue: string, items: unknown[]) => b.http('POST', '/api/v1/push', { items: items.map((payload) => ({ queue, partition: 'p', payload })) });
const pop = (queue: string, group: string, batch = 10) => b.http('GET', `/api/v1/pop/queue/${queue}?consumerGroup=${group}&batch=${batch}`);
const ack = (m: any, status: string, group: string) =>
  b.http('POST', '/api/v1/ack', { transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status, consumerGroup: group, error: `${status} by ${group}` });
const dlq = async (queue: string) => (await b.http('GET', `/api/v1/dlq?queue=${queue}`)).body;

/** Pushes `payloads`, and for each group pops them all and dead-letters the first (acking the rest). */
async function deadLetterFirst(queue: string, payloads: unknown[], groups: string[]) {
  expect((await push(queue, payloads)).status).toBe(201);
  let first: any;
  for (const g of groups) {
    const res = await pop(queue, g);
    expect(res.body.messages).toHaveLength(payloads.length);
    first = res.body.messages[0];
    expect((await ack(first, 'dlq', g)).body[0]).toMatchObject({ success: true, dlq: true });
    for (const m of res.body.messages.slice(1)) expect((await ack(m, 'completed', g)).body[0].success).toBe(true);
  }
  return first;
}

describe('DLQ requeue and delete', () => {
  it('requeue re-pushes the message at the head of its partition, removes every group entry, and is reported per id', async () => {
    const q = uniqueName('dlq-rq');
    const traceId = randomUUID();
    expect((await b.http('POST', '/api/v1/push', { items: [{ queue: q, partition: 'p', payload: { n: 1 }, traceId }, { queue: q, partition: 'p', payload: { n: 2 } }] })).status).toBe(201);
    let dead: any;
    for (const g of ['g1', 'g2']) {
      const res = await pop(q, g);
      dead = res.body.messages[0];
      await ack(dead, 'dlq', g);
      await ack(res.body.messages[1], 'completed', g);
    }
    const before = await dlq(q);
    expect(before.total).toBe(2);
    expect(new Set(before.messages.map((m: any) => m.id))).toEqual(new Set([dead.id]));

    const unknown = randomUUID();
    const res = await b.http('POST', '/api/v1/dlq/requeue', { ids: [dead.id.toUpperCase(), unknown] });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ success: true, requeued: 1 });
    expect(res.body.results[0]).toMatchObject({ index: 0, id: dead.id, success: true, code: null, queue: q, partition: 'p', partitionId: dead.partitionId, entriesDeleted: 2, offset: '3' });
    expect(res.body.results[0].messageId).not.toBe(dead.id);
    expect(res.body.results[1]).toMatchObject({ index: 1, id: unknown, success: false, code: 'MESSAGE_NOT_FOUND', entriesDeleted: 0, offset: null });
    expect((await dlq(q)).total).toBe(0);

    // Both groups see the message again, at its new offset, same payload and trace.
    for (const g of ['g1', 'g2']) {
      const again = await pop(q, g);
      expect(again.body.messages).toHaveLength(1);
      expect(again.body.messages[0]).toMatchObject({ offset: '3', data: { n: 1 }, traceId, id: res.body.results[0].messageId, retryCount: 0 });
    }
    // The original message is untouched in the log.
    const { rows } = await b.sql.query(`select msg_offset::int as o, payload from queen.messages where id = $1`, [dead.id]);
    expect(rows).toEqual([{ o: 1, payload: { n: 1 } }]);

    // A second requeue of the same id finds no entry: nothing pushed twice.
    const repeat = await b.http('POST', '/api/v1/dlq/requeue', { ids: [dead.id] });
    expect(repeat.body).toMatchObject({ requeued: 0, results: [{ success: false, code: 'MESSAGE_NOT_FOUND' }] });
    const { rows: head } = await b.sql.query(`select head_offset::int as h from queen.partitions where queue_name = $1`, [q]);
    expect(head).toEqual([{ h: 3 }]);
  });

  it('consumerGroup narrows requeue and delete to that group; delete leaves the log and cursors alone', async () => {
    const q = uniqueName('dlq-grp');
    const dead = await deadLetterFirst(q, ['a', 'b'], ['g1', 'g2']);
    const r = await b.http('POST', '/api/v1/dlq/requeue', { ids: [dead.id], consumerGroup: 'g1' });
    expect(r.body.results[0]).toMatchObject({ success: true, entriesDeleted: 1, offset: '3' });
    const left = await dlq(q);
    expect(left.messages.map((m: any) => m.consumerGroup)).toEqual(['g2']);

    const wrongGroup = await b.http('POST', '/api/v1/dlq/delete', { ids: [dead.id], consumerGroup: 'g1' });
    expect(wrongGroup.body).toMatchObject({ success: true, deleted: 0, results: [{ success: false, code: 'MESSAGE_NOT_FOUND', entriesDeleted: 0 }] });
    const del = await b.http('POST', '/api/v1/dlq/delete', { ids: [dead.id, dead.id] });
    expect(del.status).toBe(200);
    expect(del.body).toMatchObject({ success: true, deleted: 1, results: [{ index: 0, success: true, entriesDeleted: 1 }, { index: 1, success: false, entriesDeleted: 0 }] });
    expect((await dlq(q)).total).toBe(0);
    const { rows } = await b.sql.query(
      `select count(*)::int as n, max(c.cursor_offset)::int as cursor from queen.messages m join queen.partitions p on p.id = m.partition_id
         left join queen.cursors c on c.partition_id = p.id and c.consumer_group = 'g2' where p.queue_name = $1`,
      [q],
    );
    expect(rows).toEqual([{ n: 3, cursor: 2 }]);
  });

  it('requeue on an encrypted queue stores ciphertext again and pops the plaintext; many ids keep input order', async () => {
    const q = uniqueName('dlq-enc');
    expect((await b.http('POST', '/api/v1/configure', { queue: q, options: { encryptionEnabled: true } })).status).toBe(200);
    await push(q, [{ secret: 1 }, { secret: 2 }, { secret: 3 }]);
    const popped = await pop(q, 'g');
    for (const m of popped.body.messages) await ack(m, 'dlq', 'g');
    const ids = popped.body.messages.map((m: any) => m.id);
    const res = await b.http('POST', '/api/v1/dlq/requeue', { ids: [ids[2], ids[0], ids[1]] });
    expect(res.body.results.map((r: any) => [r.id, r.offset])).toEqual([
      [ids[2], '4'],
      [ids[0], '5'],
      [ids[1], '6'],
    ]);
    const again = await pop(q, 'g');
    expect(again.body.messages.map((m: any) => m.data)).toEqual([{ secret: 3 }, { secret: 1 }, { secret: 2 }]);
    const { rows } = await b.sql.query(
      `select count(*)::int as n from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1 and m.payload is null and m.encrypted is not null`,
      [q],
    );
    expect(rows).toEqual([{ n: 6 }]);
  });

  it('a requeued message wakes a parked long-poll pop', async () => {
    const q = uniqueName('dlq-wake');
    const dead = await deadLetterFirst(q, ['x'], ['g']);
    const parked = b.http('GET', `/api/v1/pop/queue/${q}?consumerGroup=g&wait=true&timeout=10000`);
    await new Promise((r) => setTimeout(r, 300));
    const started = Date.now();
    await b.http('POST', '/api/v1/dlq/requeue', { ids: [dead.id] });
    const res = await parked;
    expect(res.status).toBe(200);
    expect(res.body.messages[0]).toMatchObject({ data: 'x', offset: '2' });
    expect(Date.now() - started).toBeLessThan(900);
  });

  it('bad bodies are 400 VALIDATION_FAILED naming the field, and change nothing', async () => {
    for (const [body, field] of [
      [{}, 'body.ids'],
      [{ ids: [] }, 'body.ids'],
      [{ ids: ['not-a-uuid'] }, 'body.ids[0]'],
      [{ ids: [randomUUID()], consumerGroup: '' }, 'body.consumerGroup'],
    ] as const) {
      for (const path of ['/api/v1/dlq/requeue', '/api/v1/dlq/delete']) {
        const res = await b.http('POST', path, body);
        expect([res.status, res.body.code], path).toEqual([400, 'VALIDATION_FAILED']);
        expect(res.body.details.map((d: any) => d.field)).toContain(field);
      }
    }
  });
});
