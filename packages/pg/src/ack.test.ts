import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QueenError } from '@queen-mq/protocol';
import { sleep, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { ack, enqueue } from './index.js';

// ack from the application's own transaction (the inbox): the consumer's
// writes and its ack commit together, fenced by the lease exactly as
// POST /api/v1/ack is; a stale lease aborts the whole transaction.

let b: TestBroker;
let app: pg.Pool;
beforeAll(async () => {
  b = await startTestBroker();
  app = new pg.Pool({ connectionString: b.databaseUrl, max: 4 });
  app.on('error', () => undefined);
  await app.query('create table handled (message text primary key, note text not null)');
});
afterAll(async () => {
  await app?.end();
  await b?.stop();
});

const pop = (queue: string, query = 'batch=100') => b.http('GET', `/api/v1/pop/queue/${queue}?${query}`);
const push = (queue: string, payloads: unknown[]) => b.http('POST', '/api/v1/push', { items: payloads.map((payload) => ({ queue, payload })) });
const handledCount = async (note: string) => (await b.sql.query('select count(*)::int as n from handled where note = $1', [note])).rows[0].n as number;

describe('ack in the application transaction', () => {
  it('commits the handler write and the ack together: the messages are not delivered again', async () => {
    const q = uniqueName('inbox');
    await push(q, ['a', 'b']);
    const popped = (await pop(q)).body;
    const client = await app.connect();
    let results;
    try {
      await client.query('begin');
      for (const m of popped.messages) await client.query('insert into handled values ($1, $2)', [m.id, 'inbox']);
      results = await ack(client, popped.messages);
      await client.query('commit');
    } finally {
      client.release();
    }
    expect(results.map((r) => [r.success, r.offset, r.queueName, r.leaseReleased])).toEqual([
      [true, '1', q, false],
      [true, '2', q, true],
    ]);
    expect(await handledCount('inbox')).toBe(2);
    expect((await pop(q)).status).toBe(204);
    const cursor = await b.sql.query("select cursor_offset::text as c, lease_id from queen.cursors where consumer_group = '__QUEUE_MODE__' and partition_id = $1", [popped.partitionId]);
    expect(cursor.rows).toEqual([{ c: '2', lease_id: null }]);
  });

  it('a rolled-back ack did not happen: the same message is acked over HTTP afterwards, not alreadyAcked', async () => {
    const q = uniqueName('undo');
    await push(q, ['a']);
    const m = (await pop(q)).body.messages[0];
    const client = await app.connect();
    try {
      await client.query('begin');
      expect((await ack(client, m))[0]!.success).toBe(true);
      await client.query('rollback');
    } finally {
      client.release();
    }
    const http = await b.http('POST', '/api/v1/ack', { transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId });
    expect(http.body[0]).toMatchObject({ success: true, alreadyAcked: false });
  });

  it('a stale lease throws LEASE_EXPIRED and aborts the transaction: the business write is not committed, even on COMMIT', async () => {
    const q = uniqueName('stale');
    expect((await b.http('POST', '/api/v1/configure', { queue: q, options: { leaseTime: 1 } })).status).toBe(200);
    await push(q, ['a']);
    const first = (await pop(q)).body.messages[0];
    await sleep(1200);
    // The lease expired; another consumer took the message over.
    const second = (await pop(q)).body.messages[0];
    expect(second.leaseId).not.toBe(first.leaseId);
    const client = await app.connect();
    try {
      await client.query('begin');
      await client.query('insert into handled values ($1, $2)', [first.id, 'stale']);
      const err = await ack(client, first).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(QueenError);
      expect(err).toMatchObject({ code: 'LEASE_EXPIRED', message: expect.stringContaining('Invalid or expired lease') });
      expect((err as QueenError).extra.results).toEqual([expect.objectContaining({ success: false, code: 'LEASE_EXPIRED', transactionId: first.transactionId })]);
      // Even a caller that swallows the error cannot commit its write: PostgreSQL answers COMMIT with ROLLBACK.
      const commit = await client.query('commit');
      expect(commit.command).toBe('ROLLBACK');
    } finally {
      client.release();
    }
    expect(await handledCount('stale')).toBe(0);
    // The current holder's ack still works.
    const http = await b.http('POST', '/api/v1/ack', { transactionId: second.transactionId, partitionId: second.partitionId, leaseId: second.leaseId });
    expect(http.body[0]).toMatchObject({ success: true });
  });

  it('consume-transform-produce in one transaction: the output message and the input ack commit together', async () => {
    const input = uniqueName('in');
    const output = uniqueName('out');
    await push(input, [{ n: 20 }]);
    const m = (await pop(input)).body.messages[0];
    const client = await app.connect();
    try {
      await client.query('begin');
      await enqueue(client, output, [{ payload: { doubled: m.data.n * 2 }, transactionId: `from-${m.transactionId}` }]);
      await ack(client, m);
      await client.query('commit');
    } finally {
      client.release();
    }
    expect((await pop(output)).body.messages.map((x: any) => x.data)).toEqual([{ doubled: 40 }]);
    expect((await pop(input)).status).toBe(204);
  });

  it('acks a failed message into retry like POST /api/v1/ack, and answers alreadyAcked for a repeat', async () => {
    const q = uniqueName('failed');
    await push(q, ['a']);
    const m = (await pop(q)).body.messages[0];
    const client = await app.connect();
    try {
      const failed = await ack(client, m, { status: 'failed', error: 'downstream said no' });
      expect(failed[0]).toMatchObject({ success: true, leaseReleased: true, dlq: false });
      const again = (await pop(q)).body.messages[0];
      expect([again.transactionId, again.retryCount]).toEqual([m.transactionId, 1]);
      expect((await ack(client, again))[0]).toMatchObject({ success: true, alreadyAcked: false });
      expect((await ack(client, again))[0]).toMatchObject({ success: true, alreadyAcked: true });
    } finally {
      client.release();
    }
  });

  it('refuses messages of several consumer groups, and bad options, before sending anything', async () => {
    const client = await app.connect();
    try {
      const partitionId = '00000000-0000-7000-8000-000000000001';
      await expect(
        ack(client, [
          { transactionId: 'a', partitionId, consumerGroup: 'g1' },
          { transactionId: 'b', partitionId, consumerGroup: 'g2' },
        ]),
      ).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
      await expect(ack(client, [{ transactionId: 'a', partitionId: 'not-a-uuid' }])).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
      await expect(ack(client, [{ transactionId: 'a', partitionId }], { status: 'done' } as never)).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
      expect(await ack(client, [])).toEqual([]);
    } finally {
      client.release();
    }
  });
});
