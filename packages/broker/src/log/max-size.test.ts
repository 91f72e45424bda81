import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { eventually, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// maxSize applied: a push that would take a queue past maxSize pending
// messages (after the queue-mode cursor, Queen's measure) is refused whole
// with 429 QUEUE_FULL and Retry-After, over real HTTP on a real PostgreSQL.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

const push = (items: unknown[]) => b.http('POST', '/api/v1/push', { items });
const configure = (queue: string, maxSize: number | null) => b.http('POST', '/api/v1/configure', { queue, options: { maxSize } });
const stored = async (queue: string) =>
  Number((await b.sql.query('select count(*) from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1', [queue])).rows[0].count);
const items = (queue: string, n: number, partition = 'Default') => Array.from({ length: n }, (_, i) => ({ queue, partition, payload: { i } }));

describe('maxSize', () => {
  it('a push past maxSize pending gets 429 QUEUE_FULL with Retry-After and stores nothing; consuming makes room', async () => {
    const q = uniqueName('cap');
    expect((await configure(q, 5)).status).toBe(200);
    expect((await push([...items(q, 2, 'a'), ...items(q, 1, 'b')])).status).toBe(201);
    const full = await push(items(q, 3, 'b'));
    expect(full.status).toBe(429);
    expect(full.headers.get('retry-after')).toBe('1');
    expect(full.body).toMatchObject({ code: 'QUEUE_FULL', queue: q, pending: 3, maxSize: 5, count: 3, retryAfter: 1 });
    expect(full.body.error).toContain(`${q}: 3 pending, maxSize 5, this push 3`);
    expect(await stored(q)).toBe(3);
    // Exactly up to maxSize fits.
    expect((await push(items(q, 2))).status).toBe(201);
    expect((await push(items(q, 1))).status).toBe(429);
    // The queue-mode consumer takes and acks 2: two places free.
    const popped = await b.http('GET', `/api/v1/pop/queue/${q}/partition/a?batch=2&autoAck=true`);
    expect(popped.body.messages.length).toBe(2);
    expect((await push(items(q, 3))).status).toBe(429);
    expect((await push(items(q, 2))).status).toBe(201);
    expect(await stored(q)).toBe(7);
    // maxSize reset (null → 0, unbounded): anything goes again.
    await configure(q, null);
    expect((await push(items(q, 10))).status).toBe(201);
  });

  it('all or nothing per request: an unbounded queue in the same request gets nothing when a bounded one is full', async () => {
    const bounded = uniqueName('capb');
    const free = uniqueName('capf');
    await configure(bounded, 2);
    expect((await push(items(bounded, 2))).status).toBe(201);
    const r = await push([...items(free, 3), ...items(bounded, 1)]);
    expect(r.status).toBe(429);
    expect(r.body.queue).toBe(bounded);
    expect(await stored(free)).toBe(0);
    expect(await stored(bounded)).toBe(2);
  });

  it('20 pushes racing for the last 9 places (the partition held meanwhile): exactly 9 get in', async () => {
    const q = uniqueName('capx');
    await configure(q, 10);
    // Warm this broker's cache of the queue's options, then hold the
    // partition's append lock from another connection: every push has
    // counted or is waiting to count when it is released. Without the
    // queue-row lock each would count 1 pending and all 20 would append.
    expect((await push(items(q, 1))).status).toBe(201);
    const holder = new pg.Client({ connectionString: b.databaseUrl });
    await holder.connect();
    try {
      await holder.query('begin');
      await holder.query('select 1 from queen.partitions where queue_name = $1 for update', [q]);
      const pushes = Array.from({ length: 20 }, (_, i) => push([{ queue: q, payload: { i } }]));
      // Every push is in PostgreSQL, waiting on a lock, before the holder lets go.
      await eventually(async () => Number((await b.sql.query(`select count(*) from pg_stat_activity where wait_event_type = 'Lock' and query like '%log_push_capped_v1%'`)).rows[0].count) === 20, 10000);
      await holder.query('commit');
      const statuses = (await Promise.all(pushes)).map((r) => r.status);
      expect(statuses.filter((s) => s === 201).length).toBe(9);
      expect(statuses.filter((s) => s === 429).length).toBe(11);
    } finally {
      await holder.end();
    }
    expect(await stored(q)).toBe(10);
  });

  it('a queue without maxSize takes pushes as before (no cap, no queue-row lock)', async () => {
    const q = uniqueName('nocap');
    expect((await push(items(q, 50))).status).toBe(201);
    const holder = new pg.Client({ connectionString: b.databaseUrl });
    await holder.connect();
    try {
      await holder.query('begin');
      await holder.query('select 1 from queen.queues where name = $1 for no key update', [q]);
      const t0 = Date.now();
      expect((await push(items(q, 5))).status).toBe(201);
      expect(Date.now() - t0).toBeLessThan(1000);
      await holder.query('rollback');
    } finally {
      await holder.end();
    }
    expect(await stored(q)).toBe(55);
  });
});
