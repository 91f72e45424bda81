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
    expect(full.body.error).toContain(`${q}: 3 pending, maxSize 5, 3 to add`);
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

// The same rule on every other write path (queen.log_queue_room_v1.sql): a
// transaction is refused whole like a push; timers and schedules wait for
// room; a DLQ requeue leaves what does not fit in the DLQ.
const txn = (body: unknown) => b.http('POST', '/api/v1/transaction', body);
const metric = async (name: string, labels: string) =>
  Number(new RegExp(`^${name}\\{${labels}\\} (\\d+)`, 'm').exec((await b.http('GET', '/metrics')).body as string)?.[1] ?? 0);
const drain = async (queue: string, n: number) => {
  const r = await b.http('GET', `/api/v1/pop/queue/${queue}?batch=${n}&autoAck=true`);
  expect(r.body.messages.length).toBe(n);
};
/** Sessions of this database waiting on a lock while running one of our functions. */
const lockWaiters = async () =>
  Number((await b.sql.query(`select count(*) from pg_stat_activity where wait_event_type = 'Lock' and query like '%queen.log_%'`)).rows[0].count);

describe('maxSize on every write path', () => {
  it('a transaction past maxSize gets 429 QUEUE_FULL with Retry-After; nothing of it is stored or acked; consuming makes room', async () => {
    const q = uniqueName('cap-txn');
    const free = uniqueName('cap-txn-free');
    await configure(q, 2);
    expect((await push(items(q, 2))).status).toBe(201);
    await push(items(free, 1));
    const popped = (await b.http('GET', `/api/v1/pop/queue/${free}?batch=1`)).body.messages[0];
    const r = await txn({
      operations: [
        { type: 'push', items: items(free, 2) },
        { type: 'push', items: items(q, 1) },
        { type: 'ack', transactionId: popped.transactionId, partitionId: popped.partitionId, leaseId: popped.leaseId },
      ],
    });
    expect(r.status).toBe(429);
    expect(r.headers.get('retry-after')).toBe('1');
    expect(r.body).toMatchObject({ code: 'QUEUE_FULL', queue: q, pending: 2, maxSize: 2, count: 1, retryAfter: 1 });
    expect(await stored(q)).toBe(2);
    expect(await stored(free)).toBe(1);
    // The ack rolled back with it: the message is still leased, not consumed.
    const ack = await b.http('POST', '/api/v1/ack', { transactionId: popped.transactionId, partitionId: popped.partitionId, leaseId: popped.leaseId });
    expect(ack.body[0]).toMatchObject({ success: true });
    await drain(q, 1);
    const ok = await txn({ operations: [{ type: 'push', items: items(q, 1) }] });
    expect(ok.status).toBe(200);
    expect(ok.body.success).toBe(true);
    expect(await stored(q)).toBe(3);
    expect((await txn({ operations: [{ type: 'push', items: items(q, 1) }] })).status).toBe(429);
  });

  it('10 pushes and 10 transactions racing for the last 5 places (the queue row held meanwhile): exactly 5 get in', async () => {
    const q = uniqueName('cap-race');
    await configure(q, 6);
    expect((await push(items(q, 1))).status).toBe(201);
    // Hold the queue's row lock: every writer counts only after it is let go, one at a time.
    const holder = new pg.Client({ connectionString: b.databaseUrl });
    await holder.connect();
    try {
      await holder.query('begin');
      await holder.query('select 1 from queen.queues where name = $1 for no key update', [q]);
      const writes = Array.from({ length: 20 }, (_, i) =>
        i % 2 ? push([{ queue: q, payload: { i } }]) : txn({ operations: [{ type: 'push', items: [{ queue: q, payload: { i } }] }] }),
      );
      await eventually(async () => (await lockWaiters()) === 20, 10000);
      await holder.query('commit');
      const statuses = (await Promise.all(writes)).map((r) => r.status);
      expect(statuses.filter((s) => s === 201 || s === 200).length).toBe(5);
      expect(statuses.filter((s) => s === 429).length).toBe(15);
    } finally {
      await holder.end();
    }
    expect(await stored(q)).toBe(6);
  });

  it('timers into a full queue wait, never dropped nor fired twice, without holding back other queues; they fire as room appears', async () => {
    const q = uniqueName('cap-timer');
    const other = uniqueName('cap-timer-other');
    await configure(q, 2);
    expect((await push(items(q, 2))).status).toBe(201);
    const before = await metric('queen_fires_waiting_for_room_total', 'source="timer"');
    const r = await txn({
      timers: [
        ...[1, 2, 3].map((n) => ({ queue: q, delayMs: 0, payload: { n } })),
        { queue: other, delayMs: 50, payload: { n: 'other' } },
      ],
    });
    expect(r.status).toBe(200);
    // The timer of the other queue fires; the three wait (the firer polls every 200 ms).
    await eventually(async () => (await stored(other)) === 1, 5000);
    await eventually(async () => (await metric('queen_fires_waiting_for_room_total', 'source="timer"')) >= before + 3, 5000);
    expect(await stored(q)).toBe(2);
    const waiting = async () => Number((await b.sql.query('select count(*) from queen.log_timers where queue_name = $1', [q])).rows[0].count);
    expect(await waiting()).toBe(3);
    await drain(q, 2);
    await eventually(async () => (await stored(q)) === 4, 5000);
    expect(await waiting()).toBe(1);
    await drain(q, 1);
    await eventually(async () => (await stored(q)) === 5, 5000);
    expect(await waiting()).toBe(0);
    const fired = (await b.sql.query(`select m.payload->>'n' as n, m.transaction_id from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1 and m.transaction_id like 'timer:%' order by m.msg_offset`, [q])).rows;
    expect(fired.map((f) => f.n)).toEqual(['1', '2', '3']);
    expect(new Set(fired.map((f) => f.transaction_id)).size).toBe(3);
  });

  it('a schedule into a full queue waits past the misfire window (missed: skip) and then pushes every fire time it waited through, once', async () => {
    const q = uniqueName('cap-sched');
    const name = uniqueName('cap-sched');
    await configure(q, 1);
    expect((await push(items(q, 1))).status).toBe(201);
    const before = await metric('queen_fires_waiting_for_room_total', 'source="schedule"');
    expect((await b.http('POST', '/api/v1/schedules', { name, cron: '* * * * * *', queue: q, missed: 'skip' })).status).toBe(201);
    // Three seconds of fire times, each older than the misfire window (1 s) by the time there is room.
    await eventually(async () => (await metric('queen_fires_waiting_for_room_total', 'source="schedule"')) > before, 5000);
    await new Promise((resolve) => setTimeout(resolve, 3000));
    expect(await stored(q)).toBe(1);
    const row = (await b.sql.query('select room_wait_since, next_fire_at from queen.schedules where name = $1', [name])).rows[0];
    expect(row.room_wait_since).not.toBeNull();
    await configure(q, 1000);
    await eventually(async () => (await stored(q)) >= 5, 8000);
    await b.http('DELETE', `/api/v1/schedules/${encodeURIComponent(name)}`);
    const times = (await b.sql.query(`select m.transaction_id from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1 and m.transaction_id like 'schedule:%' order by m.msg_offset`, [q])).rows.map(
      (r) => Date.parse(r.transaction_id.slice(`schedule:${name}:`.length)),
    );
    // Consecutive seconds from the first fire time that found the queue full: none skipped, none twice.
    expect(times[0]).toBe(row.next_fire_at.getTime());
    times.forEach((t, i) => expect(t - times[0]!).toBe(i * 1000));
    expect((await b.sql.query('select room_wait_since from queen.schedules where name = $1', [name])).rows).toEqual([]);
  });

  it('a DLQ requeue into a full queue requeues what fits; the rest stays in the DLQ, answered QUEUE_FULL', async () => {
    const q = uniqueName('cap-dlq');
    await configure(q, 5);
    expect((await push(items(q, 4))).status).toBe(201);
    const popped = (await b.http('GET', `/api/v1/pop/queue/${q}?consumerGroup=g&batch=4`)).body.messages;
    for (const m of popped) {
      expect((await b.http('POST', '/api/v1/ack', { transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status: 'dlq', consumerGroup: 'g' })).body[0].dlq).toBe(true);
    }
    // 4 pending for the queue-mode consumer: room for 1.
    const r = await b.http('POST', '/api/v1/dlq/requeue', { queue: q });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ success: true, requeued: 1, refused: 3, remaining: 3 });
    expect(r.body.results.map((x: any) => [x.id, x.success, x.code, x.entriesDeleted])).toEqual([
      [popped[0].id, true, null, 1],
      ...popped.slice(1).map((m: any) => [m.id, false, 'QUEUE_FULL', 0]),
    ]);
    expect(r.body.results[1].error).toContain(`${q}: 5 pending, maxSize 5`);
    expect(r.body.results[1].error).toContain('its DLQ entries stay');
    expect(await stored(q)).toBe(5);
    expect((await b.http('GET', `/api/v1/dlq?queue=${q}`)).body.messages.map((m: any) => m.id).sort()).toEqual(popped.slice(1).map((m: any) => m.id).sort());
    // By id, into room made by the queue-mode consumer: all of them go.
    await drain(q, 5);
    const again = await b.http('POST', '/api/v1/dlq/requeue', { ids: popped.slice(1).map((m: any) => m.id) });
    expect(again.body).toMatchObject({ requeued: 3, refused: 0 });
    expect((await b.http('GET', `/api/v1/dlq?queue=${q}`)).body.messages).toEqual([]);
    expect(await stored(q)).toBe(8);
  });
});
