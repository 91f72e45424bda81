import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { startTestBroker, type TestBroker } from '@queen-mq/testing';
import { PUSH_RUN_SQL } from '../sql/queen.log_append_v1.js';

// Issue 31: a wildcard pop reads the group's pending set (queen.pending,
// migration 027), so its cost follows the partitions that hold work, not
// the partitions of the queue. These cases check that cost at a seeded
// scale, and that the set never loses a partition: a push in flight while
// a group's first pop lists it, a stale row a push raises while a pop drops
// it, a seek back, a group delete, a partition created after the listing.

const MANY = 2_000;
const QUEUE_MODE = '__QUEUE_MODE__';

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => {
  await b?.stop();
});

const uniqueName = (tag: string) => `${tag}-${randomUUID().slice(0, 8)}`;

async function push(queue: string, partition: string, payload: unknown = 1) {
  const r = await b.http('POST', '/api/v1/push', { items: [{ queue, partition, payload }] });
  expect(r.status).toBe(201);
}

async function pop(queue: string, query = '') {
  const r = await b.http('GET', `/api/v1/pop/queue/${queue}?wait=false${query ? `&${query}` : ''}`);
  return r.status === 200 ? (r.body.messages as any[]) : [];
}

async function ack(messages: any[], group?: string) {
  const r = await b.http('POST', '/api/v1/ack/batch', {
    acknowledgments: messages.map((m) => ({ transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, offset: m.offset })),
    ...(group ? { consumerGroup: group } : {}),
  });
  expect(r.status).toBe(200);
}

/** A queue of `n` partitions with one message each, consumed (its queue-mode cursors at the heads). */
async function consumedQueue(n: number) {
  const queue = uniqueName('wide');
  for (let i = 0; i < n; i += 500) {
    const items = Array.from({ length: Math.min(500, n - i) }, (_, j) => ({ queue, partition: `p${i + j}`, payload: 0 }));
    expect((await b.http('POST', '/api/v1/push', { items })).status).toBe(201);
  }
  await b.sql.query(
    `insert into queen.cursors (partition_id, consumer_group, cursor_offset)
     select p.id, $2, p.head_offset from queen.partitions p where p.queue_name = $1
     on conflict (partition_id, consumer_group) do update set cursor_offset = excluded.cursor_offset`,
    [queue, QUEUE_MODE],
  );
  // The group's first wildcard pop lists it (and reads the queue once).
  await b.sql.query(`select queen.log_pending_start_v1(id, $2) from queen.queues where name = $1`, [queue, QUEUE_MODE]);
  return queue;
}

/** Rows a wildcard pop of `queue` (batch 1, autoAck) reads from the log's tables, counted in its own transaction. */
async function rowsReadByPop(queue: string) {
  const c = await b.sql.connect();
  // A backend's not yet reported counts include its earlier transactions: the difference is this pop's.
  const read = async () =>
    (
      await c.query(
        `select coalesce(sum(coalesce(idx_tup_fetch, 0) + coalesce(seq_tup_read, 0)), 0)::int as n
           from pg_stat_xact_user_tables where schemaname = 'queen' and relname in ('partitions', 'cursors', 'pending')`,
      )
    ).rows[0].n as number;
  try {
    await c.query('begin');
    const before = await read();
    const { rows } = await c.query(
      `select m.* from queen.pop_target_v1($1, null) t,
              queen.log_pop_v4(t.queue_id, null, $2, 1, 1, true, $3::uuid) m where m.msg_offset is not null`,
      [queue, QUEUE_MODE, randomUUID()],
    );
    const after = await read();
    await c.query('rollback');
    return { claimed: rows.length, read: after - before };
  } finally {
    c.release();
  }
}

describe('wildcard pop reads the pending set', () => {
  it(`costs the same on a queue of ${MANY} partitions as on one of 10 when one partition holds a message`, async () => {
    const small = await consumedQueue(10);
    const wide = await consumedQueue(MANY);
    await push(small, 'p7');
    await push(wide, 'p7');
    const s = await rowsReadByPop(small);
    const w = await rowsReadByPop(wide);
    expect(s.claimed).toBe(1);
    expect(w.claimed).toBe(1);
    // Before the pending set a wildcard pop read every partition and cursor
    // of its queue (over 2 * MANY rows here).
    expect(w.read).toBeLessThan(40);
    expect(w.read).toBeLessThanOrEqual(s.read + 4);
  });

  it("serves the partition whose oldest pending message is oldest once the group is listed (claimOrder 'oldest')", async () => {
    const queue = uniqueName('order');
    expect((await b.http('POST', '/api/v1/configure', { queue, options: { claimOrder: 'oldest' } })).status).toBe(200);
    // 'later' is created first (the lower id), so an order by id alone would pick it.
    await push(queue, 'later');
    await ack(await pop(queue));
    await push(queue, 'earlier');
    await new Promise((r) => setTimeout(r, 20));
    await push(queue, 'later');
    const [m] = await pop(queue);
    expect(m.partition).toBe('earlier');
  });

  it("a partition pending for long but consumed since is served by its oldest message left, not by when it became pending (claimOrder 'oldest')", async () => {
    const queue = uniqueName('fair');
    expect((await b.http('POST', '/api/v1/configure', { queue, options: { claimOrder: 'oldest' } })).status).toBe(200);
    await push(queue, 'a', 'a1');
    await new Promise((r) => setTimeout(r, 10));
    await push(queue, 'b', 'b1');
    await new Promise((r) => setTimeout(r, 10));
    await push(queue, 'a', 'a2');
    const first = await pop(queue, 'batch=10');
    expect(first.map((m) => m.data)).toEqual(['a1', 'a2']);
    await push(queue, 'a', 'a3'); // a stays pending (since: a1's time) while its oldest message left is a3
    await ack(first);
    await new Promise((r) => setTimeout(r, 10));
    expect((await pop(queue)).map((m) => m.data)).toEqual(['b1']);
  });

  it('a push in flight while the group is listed is seen by the listing or lists itself', async () => {
    const queue = uniqueName('inflight');
    await push(queue, 'a');
    const pid = (await b.sql.query(`select id from queen.partitions where queue_name = $1 and name = 'a'`, [queue])).rows[0].id as string;
    const holder = await b.sql.connect();
    try {
      // A push held open from a second connection, its partition appended.
      await holder.query('begin');
      await holder.query({ ...PUSH_RUN_SQL, values: [pid, JSON.stringify([{ payload: 2 }]), null] });
      // The group's first wildcard pop tries the queue's pending lock until
      // the push commits (it holds the lock shared), then lists the group.
      const first = pop(queue, 'batch=10&autoAck=true');
      await new Promise((r) => setTimeout(r, 150));
      await holder.query('commit');
      expect((await first).map((m) => m.data)).toEqual([1, 2]);
      const listed = await b.sql.query(`select count(*)::int as n from queen.pending_groups g join queen.queues q on q.id = g.queue_id where q.name = $1`, [queue]);
      expect(listed.rows[0].n).toBe(1);
    } finally {
      holder.release();
    }

    // The other way round: a listing held open, a push to a new partition waits for it.
    const lister = await b.sql.connect();
    try {
      const queueId = (await b.sql.query(`select id from queen.queues where name = $1`, [queue])).rows[0].id as string;
      await lister.query('begin');
      await lister.query(`select queen.log_pending_start_v1($1, 'g2')`, [queueId]);
      const pushed = push(queue, 'fresh', 3);
      await waitForLock(queue);
      await lister.query('commit');
      await pushed;
      const got = [...(await pop(queue, 'consumerGroup=g2&batch=10&autoAck=true')), ...(await pop(queue, 'consumerGroup=g2&batch=10&autoAck=true'))];
      expect(got.map((m) => m.data).sort()).toEqual([1, 2, 3]);
    } finally {
      lister.release();
    }
  });

  it('a drained partition a push raises while a pop drops its row stays pending', async () => {
    const queue = uniqueName('raise');
    await push(queue, 'a', 1);
    await ack(await pop(queue)); // listed; the row of 'a' is now stale
    const pid = (await b.sql.query(`select id from queen.partitions where queue_name = $1`, [queue])).rows[0].id as string;
    // Drained for over 10 s: a pop that reaches the row tries to drop it.
    await b.sql.query(`update queen.pending set since = since - interval '1 minute' where partition_id = $1`, [pid]);
    const holder = await b.sql.connect();
    try {
      await holder.query('begin');
      await holder.query({ ...PUSH_RUN_SQL, values: [pid, JSON.stringify([{ payload: 2 }]), null] });
      // The pop sees the partition drained (the push is not committed),
      // tries to drop its row and passes it over: the push holds it, and a
      // pop never waits for a push.
      expect(await pop(queue)).toEqual([]);
      await holder.query('commit');
    } finally {
      holder.release();
    }
    expect((await pop(queue)).map((m) => m.data)).toEqual([2]);
  });

  it('a seek back, a group delete and a partition created after the listing make partitions pending again', async () => {
    const queue = uniqueName('back');
    await push(queue, 'a', 1);
    await ack(await pop(queue, 'consumerGroup=g'), 'g');
    expect(await pop(queue, 'consumerGroup=g')).toEqual([]);

    const seek = await b.http('POST', `/api/v1/consumer-groups/g/queues/${queue}/partitions/a/seek`, { offset: '0' });
    expect(seek.status).toBe(200);
    const again = await pop(queue, 'consumerGroup=g');
    expect(again.map((m) => m.data)).toEqual([1]);
    await ack(again, 'g');

    expect((await b.http('DELETE', `/api/v1/consumer-groups/g/queues/${queue}`)).status).toBe(200);
    expect((await pop(queue, 'consumerGroup=g&autoAck=true')).map((m) => m.data)).toEqual([1]);

    await push(queue, 'b', 2);
    expect((await pop(queue, 'consumerGroup=g&autoAck=true')).map((m) => m.data)).toEqual([2]);
  });

  it('a row drained for over 10 s is dropped by the next pop that reaches it; a recently drained one is kept for the next push', async () => {
    const queue = uniqueName('drop');
    await push(queue, 'a', 1);
    await push(queue, 'b', 2);
    expect((await pop(queue, 'batch=10&partitions=2&autoAck=true')).length).toBe(2);
    const rows = async () =>
      (await b.sql.query(`select count(*)::int as n from queen.pending pp join queen.queues q on q.id = pp.queue_id where q.name = $1`, [queue])).rows[0].n;
    expect(await pop(queue)).toEqual([]);
    expect(await rows()).toBe(2);
    await b.sql.query(
      `update queen.pending set since = since - interval '1 minute'
        where partition_id = (select id from queen.partitions where queue_name = $1 and name = 'a')`,
      [queue],
    );
    expect(await pop(queue)).toEqual([]);
    expect(await rows()).toBe(1);
    await push(queue, 'a', 3);
    expect((await pop(queue)).map((m) => m.data)).toEqual([3]);
  });

  it('a push leaves a row it finds as it is; a stale drained row is not dropped while a push holds its partition', async () => {
    const queue = uniqueName('held');
    await push(queue, 'a', 1);
    expect((await pop(queue, 'autoAck=true')).map((m) => m.data)).toEqual([1]);
    const pid = (await b.sql.query(`select id from queen.partitions where queue_name = $1 and name = 'a'`, [queue])).rows[0].id as string;
    const row = async () => (await b.sql.query(`select head_offset::int as h, since from queen.pending where partition_id = $1`, [pid])).rows;
    const [before] = await row();
    // A push to a partition already pending writes no row version.
    await push(queue, 'a', 2);
    expect(await row()).toEqual([before]);
    expect((await pop(queue, 'autoAck=true')).map((m) => m.data)).toEqual([2]);
    // Drained and stale, while a push to it is open on another connection: kept.
    await b.sql.query(`update queen.pending set since = since - interval '1 minute' where partition_id = $1`, [pid]);
    const holder = await b.sql.connect();
    try {
      await holder.query('begin');
      await holder.query({ ...PUSH_RUN_SQL, values: [pid, JSON.stringify([{ payload: 3 }]), null] });
      expect(await pop(queue)).toEqual([]);
      expect(await row()).toHaveLength(1);
      await holder.query('commit');
    } finally {
      holder.release();
    }
    expect((await pop(queue, 'autoAck=true')).map((m) => m.data)).toEqual([3]);
    // Drained and stale with no push: dropped; the next push writes it again.
    expect(await pop(queue)).toEqual([]);
    expect(await row()).toEqual([]);
    await push(queue, 'a', 4);
    expect(await row()).toHaveLength(1);
    expect((await pop(queue)).map((m) => m.data)).toEqual([4]);
  });
});

describe('pending set under concurrency', () => {
  it('pushes across partitions, first pops of new groups, seeks and group deletes at once: no deadlock, nothing lost, nothing twice', async () => {
    const queue = uniqueName('storm');
    const statuses: number[] = [];
    const failures: string[] = [];
    const seen = (what: string, r: { status: number; body: any }) => {
      statuses.push(r.status);
      if (r.status >= 500) failures.push(`${what} ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
    };
    const got = new Map<string, number>(); // g1's deliveries by payload
    let pushed = 0;
    let running = true;
    const pushers = [0, 1, 2, 3].map(async (w) => {
      for (let i = 0; i < 30; i++) {
        // Five partitions per request, in an order of their own (pushes lock them ascending).
        const items = [0, 1, 2, 3, 4].map((k) => ({ queue, partition: `p${(w * 7 + i * 3 + k * 5) % 20}`, payload: `${w}-${i}-${k}` }));
        const r = await b.http('POST', '/api/v1/push', { items });
        seen('push', r);
        if (r.status === 201) pushed += items.length;
      }
    });
    const popper = (group: string, record: boolean) => async () => {
      while (running) {
        const r = await b.http('GET', `/api/v1/pop/queue/${queue}?wait=false&batch=7&partitions=3&autoAck=true&consumerGroup=${group}`);
        seen(`pop ${group}`, r);
        if (record && r.status === 200) for (const m of r.body.messages) got.set(m.data, (got.get(m.data) ?? 0) + 1);
        if (r.status !== 200) await new Promise((res) => setTimeout(res, 5));
      }
    };
    const poppers = [popper('g1', true), popper('g1', true), popper('g2', false), popper('g3', false)].map((f) => f());
    const admin = (async () => {
      for (let i = 0; running && i < 40; i++) {
        const r1 = await b.http('POST', `/api/v1/consumer-groups/g2/queues/${queue}/seek`, { timestamp: new Date(0).toISOString() });
        seen('seek', r1);
        const r2 = await b.http('DELETE', `/api/v1/consumer-groups/g3/queues/${queue}`);
        seen('group delete', r2);
        await new Promise((res) => setTimeout(res, 20));
      }
    })();
    await Promise.all(pushers);
    running = false;
    await Promise.all([...poppers, admin]);
    // What g1 has not had yet, drained.
    for (;;) {
      const r = await b.http('GET', `/api/v1/pop/queue/${queue}?wait=false&batch=100&partitions=20&autoAck=true&consumerGroup=g1`);
      if (r.status !== 200) break;
      for (const m of r.body.messages) got.set(m.data, (got.get(m.data) ?? 0) + 1);
    }
    expect(failures).toEqual([]);
    expect(statuses.length).toBeGreaterThan(120);
    expect(got.size).toBe(pushed);
    expect([...got.values()].every((n) => n === 1)).toBe(true);
  }, 60_000);
});

/** Until a statement on the queue waits for a lock (the pending lock or a row lock). */
async function waitForLock(queue: string) {
  for (let i = 0; i < 200; i++) {
    const { rows } = await b.sql.query(`select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and datname = current_database()`);
    if (rows[0].n > 0) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`nothing waited for a lock on ${queue}`);
}
