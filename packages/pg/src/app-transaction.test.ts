import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QueenError } from '@queen-mq/protocol';
import { eventually, freshDatabase, sleep, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { ack, enqueue } from './index.js';

// enqueue and ack from the application's own transaction, against a real
// broker and its PostgreSQL. enqueue: what commits is visible to pops over
// HTTP, what rolls back (or dies with its process) is not, and the allocator
// is the one every HTTP push goes through (offsets, order, deduplication).
// ack (the inbox): the consumer's writes and its ack commit together, fenced
// by the lease exactly as POST /api/v1/ack is; a stale lease aborts the whole
// transaction.

let b: TestBroker;
let app: pg.Pool;
beforeAll(async () => {
  b = await startTestBroker();
  app = new pg.Pool({ connectionString: b.databaseUrl, max: 4 });
  app.on('error', () => undefined);
  await app.query('create table orders (id serial primary key, item text not null)');
  await app.query('create table handled (message text primary key, note text not null)');
});
afterAll(async () => {
  await app?.end();
  await b?.stop();
});

/** Runs `fn` in BEGIN ... COMMIT on one connection (ROLLBACK when it throws). */
async function inTransaction<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await app.connect();
  try {
    await client.query('begin');
    const out = await fn(client);
    await client.query('commit');
    return out;
  } catch (err) {
    await client.query('rollback');
    throw err;
  } finally {
    client.release();
  }
}

const pop = (queue: string, query = 'batch=100') => b.http('GET', `/api/v1/pop/queue/${queue}?${query}`);
const push = (queue: string, items: Record<string, unknown>[]) => b.http('POST', '/api/v1/push', { items: items.map((i) => ({ queue, ...i })) });
const pushPayloads = (queue: string, payloads: unknown[]) => push(queue, payloads.map((payload) => ({ payload })));
const handledCount = async (note: string) => (await b.sql.query('select count(*)::int as n from handled where note = $1', [note])).rows[0].n as number;

describe('enqueue in the application transaction', () => {
  it('a committed enqueue is popped over HTTP, beside the order row it committed with', async () => {
    const q = uniqueName('outbox');
    const results = await inTransaction(async (client) => {
      const { rows } = await client.query<{ id: number }>('insert into orders (item) values ($1) returning id', ['book']);
      return enqueue(client, q, [{ payload: { orderId: rows[0]!.id }, transactionId: `order-${rows[0]!.id}` }, 'plain payload'], { partition: 'p1' });
    });
    expect(results).toEqual([
      { index: 0, transaction_id: expect.stringMatching(/^order-\d+$/), status: 'queued', message_id: expect.any(String), partition_id: expect.any(String), queueName: q, offset: '1', trace_id: null },
      { index: 1, transaction_id: results[1]!.message_id, status: 'queued', message_id: expect.any(String), partition_id: results[0]!.partition_id, queueName: q, offset: '2', trace_id: null },
    ]);
    const r = await pop(q);
    expect(r.status).toBe(200);
    expect(r.body.partition).toBe('p1');
    expect(r.body.messages.map((m: any) => [m.data, m.transactionId, m.offset])).toEqual([
      [{ orderId: expect.any(Number) }, results[0]!.transaction_id, '1'],
      ['plain payload', results[1]!.message_id, '2'],
    ]);
  });

  it('a rolled-back enqueue leaves nothing: no message, no queue', async () => {
    const q = uniqueName('rollback');
    await expect(
      inTransaction(async (client) => {
        await enqueue(client, q, { payload: 1 });
        throw new Error('the order failed');
      }),
    ).rejects.toThrow('the order failed');
    expect((await pop(q)).status).toBe(204);
    expect((await b.sql.query('select count(*)::int as n from queen.queues where name = $1', [q])).rows[0].n).toBe(0);
  });

  it('a client process killed between its statements writes nothing, and the partition is free again at once', async () => {
    const q = uniqueName('crash');
    await push(q, [{ payload: 'before' }]);
    // A child holds BEGIN; INSERT order; enqueue; and is killed before COMMIT.
    const source = fileURLToPath(new URL('./index.ts', import.meta.url));
    const program = `
      import pg from 'pg';
      import { enqueue } from ${JSON.stringify(source)};
      const client = new pg.Client({ connectionString: process.env.DB });
      await client.connect();
      await client.query('begin');
      await client.query("insert into orders (item) values ('crash')");
      await enqueue(client, process.env.Q, [{ payload: 'lost' }]);
      console.log('enqueued');
      setInterval(() => {}, 1000);`;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', program], {
      env: { ...process.env, DB: b.databaseUrl, Q: q },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout!.on('data', (d) => (out += d));
    child.stderr!.on('data', (d) => (out += d));
    await eventually(async () => out.includes('enqueued') || child.exitCode !== null, 30000);
    expect(out).toContain('enqueued');
    // The uncommitted message holds offset 2 and the partition's append lock.
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
    // PostgreSQL aborts the dead session's transaction; the next push gets offset 2, gapless.
    const after = await push(q, [{ payload: 'after' }]);
    expect(after.status).toBe(201);
    expect(after.body[0].offset).toBe('2');
    const r = await pop(q);
    expect(r.body.messages.map((m: any) => m.data)).toEqual(['before', 'after']);
    expect((await b.sql.query("select count(*)::int as n from orders where item = 'crash'")).rows[0].n).toBe(0);
  });

  it('a concurrent HTTP push to the same partition waits for the commit and takes the next offsets: gapless, in commit order', async () => {
    const q = uniqueName('order');
    expect((await push(q, [{ payload: 'http-1' }])).body[0].offset).toBe('1');
    const client = await app.connect();
    try {
      await client.query('begin');
      const mine = await enqueue(client, q, [{ payload: 'tx-1' }, { payload: 'tx-2' }]);
      expect(mine.map((r) => r.offset)).toEqual(['2', '3']);
      const racing = push(q, [{ payload: 'http-2' }]);
      // The HTTP push is parked on the partition's append lock, which this transaction holds.
      await eventually(async () => {
        const { rows } = await b.sql.query(
          "select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and query like '%log_append_v1%' and datname = current_database()",
        );
        return rows[0].n === 1;
      });
      await sleep(200);
      let settled = false;
      void racing.then(() => (settled = true));
      await sleep(50);
      expect(settled).toBe(false);
      await client.query('commit');
      const r = await racing;
      expect(r.status).toBe(201);
      expect(r.body[0].offset).toBe('4');
    } finally {
      client.release();
    }
    const popped = await pop(q);
    expect(popped.body.messages.map((m: any) => [m.offset, m.data])).toEqual([
      ['1', 'http-1'],
      ['2', 'tx-1'],
      ['3', 'tx-2'],
      ['4', 'http-2'],
    ]);
  });

  it('deduplicates across the two paths: a transactionId pushed over HTTP is a duplicate for enqueue, and the other way round', async () => {
    const q = uniqueName('dedup');
    const http = await push(q, [{ payload: 'first', transactionId: 'pay-1' }]);
    expect(http.body[0].status).toBe('queued');
    const again = await inTransaction((client) => enqueue(client, q, [{ payload: 'second', transactionId: 'pay-1' }, { payload: 'new', transactionId: 'pay-2' }]));
    expect(again.map((r) => [r.status, r.offset, r.message_id])).toEqual([
      ['duplicate', '1', http.body[0].message_id],
      ['queued', '2', expect.any(String)],
    ]);
    const back = await push(q, [{ payload: 'third', transactionId: 'pay-2' }]);
    expect([back.body[0].status, back.body[0].message_id]).toEqual(['duplicate', again[1]!.message_id]);
    expect((await pop(q)).body.messages.map((m: any) => m.data)).toEqual(['first', 'new']);
  });

  it('wakes a parked long-poll pop when the transaction commits, not before', async () => {
    const q = uniqueName('wake');
    await push(q, [{ payload: 'seed' }]);
    expect((await pop(q, 'autoAck=true')).status).toBe(200);
    const client = await app.connect();
    try {
      const t0 = Date.now();
      const parked = b.http('GET', `/api/v1/pop/queue/${q}?wait=true&timeout=10000`);
      let answered = false;
      void parked.then(() => (answered = true));
      await sleep(300);
      await client.query('begin');
      await enqueue(client, q, [{ payload: 'woken' }]);
      // Past the parked pop's 1 s re-check: it saw nothing uncommitted and parked again.
      await sleep(1150 - (Date.now() - t0));
      expect(answered).toBe(false);
      const committed = Date.now();
      await client.query('commit');
      const r = await parked;
      const latency = Date.now() - committed;
      expect(r.status).toBe(200);
      expect(r.body.messages.map((m: any) => m.data)).toEqual(['woken']);
      // The next re-check is at 2 s: only the commit's NOTIFY answers it sooner.
      expect(latency).toBeLessThan(600);
    } finally {
      client.release();
    }
  });

  it("publishes the wake-up on the brokers' channel at the commit only, never for a rollback or for duplicates only", async () => {
    const q = uniqueName('notify');
    const listener = new pg.Client({ connectionString: b.databaseUrl });
    await listener.connect();
    const heard: string[] = [];
    listener.on('notification', (n) => {
      if (n.payload === q) heard.push(n.channel);
    });
    await listener.query('listen queen_push');
    const client = await app.connect();
    try {
      await client.query('begin');
      await enqueue(client, q, [{ payload: 1, transactionId: 'n-1' }]);
      await sleep(300);
      expect(heard).toEqual([]);
      await client.query('commit');
      await eventually(async () => heard.length === 1);
      expect(heard).toEqual(['queen_push']);

      await client.query('begin');
      await enqueue(client, q, [{ payload: 2 }]);
      await client.query('rollback');
      await client.query('begin');
      expect((await enqueue(client, q, [{ payload: 1, transactionId: 'n-1' }]))[0]!.status).toBe('duplicate');
      await client.query('commit');
      await sleep(300);
      expect(heard).toEqual(['queen_push']);
    } finally {
      client.release();
      await listener.end();
    }
  });

  it('refuses an encrypted queue with QUEUE_ENCRYPTED (only the broker holds the key) and stores nothing', async () => {
    const q = uniqueName('secret');
    await push(q, [{ payload: 'x' }]);
    await b.sql.query(`update queen.queues set options = options || '{"encryptionEnabled": true}' where name = $1`, [q]);
    const err = await inTransaction((client) => enqueue(client, q, [{ payload: 'plaintext' }])).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(QueenError);
    expect(err).toMatchObject({ code: 'QUEUE_ENCRYPTED', status: 409, extra: { queues: [q] } });
    expect((await b.sql.query('select count(*)::int as n from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1', [q])).rows[0].n).toBe(1);
  });

  it('refuses a queue at its maxSize with QUEUE_FULL: the order row rolls back with it; with room it commits; racing enqueues get exactly the room left', async () => {
    const q = uniqueName('capped');
    expect((await b.http('POST', '/api/v1/configure', { queue: q, options: { maxSize: 3 } })).status).toBe(200);
    expect((await pushPayloads(q, [1, 2])).status).toBe(201);
    const stored = async () => (await b.sql.query('select count(*)::int as n from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1', [q])).rows[0].n;
    const orders = async (item: string) => (await b.sql.query('select count(*)::int as n from orders where item = $1', [item])).rows[0].n;
    const err = await inTransaction(async (client) => {
      await client.query('insert into orders (item) values ($1)', [`${q}-over`]);
      return enqueue(client, q, ['a', 'b']);
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(QueenError);
    expect(err).toMatchObject({ code: 'QUEUE_FULL', status: 429, extra: { queue: q, pending: 2, maxSize: 3, count: 2 } });
    expect((err as Error).message).toContain(`${q}: 2 pending, maxSize 3, 2 to add`);
    expect(await orders(`${q}-over`)).toBe(0);
    expect(await stored()).toBe(2);
    // Three transactions race for the last place while one holds the queue row: one gets it.
    const holder = await app.connect();
    try {
      await holder.query('begin');
      await holder.query('select 1 from queen.queues where name = $1 for no key update', [q]);
      const racing = Array.from({ length: 3 }, (_, i) =>
        inTransaction(async (client) => {
          await client.query('insert into orders (item) values ($1)', [`${q}-race`]);
          return enqueue(client, q, [{ payload: i }]);
        }).then(() => 'in', (e: unknown) => (e as QueenError).code),
      );
      await eventually(async () => (await b.sql.query(`select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and query like '%app_enqueue_v1%'`)).rows[0].n === 3, 10000);
      await holder.query('commit');
      expect((await Promise.all(racing)).sort()).toEqual(['QUEUE_FULL', 'QUEUE_FULL', 'in']);
    } finally {
      holder.release();
    }
    expect(await stored()).toBe(3);
    expect(await orders(`${q}-race`)).toBe(1);
  });

  it('refuses bad input before sending anything: VALIDATION_FAILED naming the field', async () => {
    await expect(enqueue(app, 'q', [{ payload: 1, transactionId: '' }])).rejects.toMatchObject({ code: 'VALIDATION_FAILED', details: [{ field: 'items[0].transactionId' }] });
    await expect(enqueue(app, 'q', [1], { partiton: 'p' } as never)).rejects.toMatchObject({ code: 'VALIDATION_FAILED', message: expect.stringContaining('did you mean "partition"') });
    expect(await enqueue(app, 'q', [])).toEqual([]);
  });
});

describe('a database without the Queen schema', () => {
  it('answers NOT_READY naming what is missing, for enqueue and ack', async () => {
    const bare = new pg.Client({ connectionString: await freshDatabase() });
    await bare.connect();
    try {
      await expect(enqueue(bare, 'q', [1])).rejects.toMatchObject({ code: 'NOT_READY', message: expect.stringContaining('no Queen schema') });
      await expect(ack(bare, [{ transactionId: 't', partitionId: '00000000-0000-7000-8000-000000000001' }])).rejects.toMatchObject({ code: 'NOT_READY' });
    } finally {
      await bare.end();
    }
  });
});

describe('ack in the application transaction', () => {
  it('commits the handler write and the ack together: the messages are not delivered again', async () => {
    const q = uniqueName('inbox');
    await pushPayloads(q, ['a', 'b']);
    const popped = (await pop(q)).body;
    const results = await inTransaction(async (client) => {
      for (const m of popped.messages) await client.query('insert into handled values ($1, $2)', [m.id, 'inbox']);
      return ack(client, popped.messages);
    });
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
    await pushPayloads(q, ['a']);
    const m = (await pop(q)).body.messages[0];
    const undone = inTransaction(async (client) => {
      expect((await ack(client, m))[0]!.success).toBe(true);
      throw new Error('the handler failed after acking');
    });
    await expect(undone).rejects.toThrow('the handler failed');
    const http = await b.http('POST', '/api/v1/ack', { transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId });
    expect(http.body[0]).toMatchObject({ success: true, alreadyAcked: false });
  });

  it('a stale lease throws LEASE_EXPIRED and aborts the transaction: the business write is not committed, even on COMMIT', async () => {
    const q = uniqueName('stale');
    expect((await b.http('POST', '/api/v1/configure', { queue: q, options: { leaseTime: 1 } })).status).toBe(200);
    await pushPayloads(q, ['a']);
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
    await pushPayloads(input, [{ n: 20 }]);
    const m = (await pop(input)).body.messages[0];
    await inTransaction(async (client) => {
      await enqueue(client, output, [{ payload: { doubled: m.data.n * 2 }, transactionId: `from-${m.transactionId}` }]);
      await ack(client, m);
    });
    expect((await pop(output)).body.messages.map((x: any) => x.data)).toEqual([{ doubled: 40 }]);
    expect((await pop(input)).status).toBe(204);
  });

  it('acks a failed message into retry like POST /api/v1/ack, and answers alreadyAcked for a repeat (through a Pool: each call its own transaction)', async () => {
    const q = uniqueName('failed');
    await pushPayloads(q, ['a']);
    const m = (await pop(q)).body.messages[0];
    const failed = await ack(app, m, { status: 'failed', error: 'downstream said no' });
    expect(failed[0]).toMatchObject({ success: true, leaseReleased: true, dlq: false });
    const again = (await pop(q)).body.messages[0];
    expect([again.transactionId, again.retryCount]).toEqual([m.transactionId, 1]);
    expect((await ack(app, again))[0]).toMatchObject({ success: true, alreadyAcked: false });
    expect((await ack(app, again))[0]).toMatchObject({ success: true, alreadyAcked: true });
  });

  it('refuses messages of several consumer groups, and bad options, before sending anything', async () => {
    const partitionId = '00000000-0000-7000-8000-000000000001';
    await expect(
      ack(app, [
        { transactionId: 'a', partitionId, consumerGroup: 'g1' },
        { transactionId: 'b', partitionId, consumerGroup: 'g2' },
      ]),
    ).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
    await expect(ack(app, [{ transactionId: 'a', partitionId: 'not-a-uuid' }])).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
    await expect(ack(app, [{ transactionId: 'a', partitionId }], { status: 'done' } as never)).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
    expect(await ack(app, [])).toEqual([]);
  });
});
