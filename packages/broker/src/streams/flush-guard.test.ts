import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleep, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// The idle flush's guard (queen_streams.flush_pending_v1.sql): an ack:null cycle
// element carrying `flush_before` commits only if every message of its
// source partition stamped before that instant is consumed by the group — a
// push still between stamping and commit included — and otherwise answers
// FLUSH_DEFERRED and writes nothing. The push is held open on purpose from a
// second database connection (the allocator inside an open transaction).

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

const GROUP = 'flush-guard-group';

/** A query, its source partition with one message consumed by GROUP, and one open window row. */
async function consumedPartition() {
  const src = uniqueName('fg-src');
  const sink = uniqueName('fg-sink');
  const reg = await b.http('POST', '/streams/v1/queries', { name: uniqueName('fg'), source_queue: src, config_hash: 'h' });
  expect(reg.status).toBe(200);
  const pushed = await b.http('POST', '/api/v1/push', { items: [{ queue: src, payload: { n: 0 } }] });
  expect(pushed.status).toBe(201);
  const pid = pushed.body[0].partition_id as string;
  const popped = await b.http('GET', `/api/v1/pop/queue/${src}?batch=10&autoAck=true&consumerGroup=${GROUP}`);
  expect(popped.status).toBe(200);
  const qid = reg.body.query_id as string;
  const opened = await flush(qid, pid, { state_ops: [{ type: 'upsert', key: 'w', value: { windowEnd: 1 } }] });
  expect(opened.success).toBe(true);
  return { qid, pid, src, sink, version: opened.state_results[0].version as number };
}

async function flush(qid: string, pid: string, body: Record<string, unknown>) {
  const res = await b.http('POST', '/streams/v1/cycle', { query_id: qid, partition_id: pid, consumer_group: GROUP, ack: null, ...body });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}

/** The flush that closes the window row: delete at its version, push its emit. */
const closing = (sink: string, version: number, flushBefore: number) => ({
  state_ops: [{ type: 'delete', key: 'w', expected_version: version }],
  push_items: [{ queue: sink, payload: { closed: true }, transactionId: 'emit-w' }],
  flush_before: flushBefore,
});

async function stateVersions(qid: string, pid: string) {
  const res = await b.http('POST', '/streams/v1/state/get', { query_id: qid, partition_id: pid });
  return (res.body.rows as { key: string; version: number }[]).map((r) => [r.key, r.version]);
}

async function count(queue: string) {
  const { rows } = await b.sql.query(
    'select count(*)::int as n from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1',
    [queue],
  );
  return rows[0].n as number;
}

/** The broker's clock (the one that stamps createdAt), epoch ms. */
async function dbNow() {
  const { rows } = await b.sql.query(`select (extract(epoch from clock_timestamp()) * 1000)::float8 as ms`);
  return Math.floor(rows[0].ms);
}

describe('idle flush guard (flush_before)', () => {
  it('I28.1 a push stamped before flush_before but not committed: the flush waits for it, then answers FLUSH_DEFERRED and writes nothing', async () => {
    const { qid, pid, sink, version } = await consumedPartition();
    const held = await b.sql.connect();
    try {
      await held.query('begin');
      // The allocator inside an open transaction: 40 items stamped, the partition row held FOR UPDATE until commit.
      const items = JSON.stringify(Array.from({ length: 40 }, (_, i) => ({ payload: { n: i + 1 } })));
      const { rows } = await held.query(
        `select (extract(epoch from max(r_created_at)) * 1000)::float8 as ms from queen.log_append_v1($1::uuid, $2::jsonb, null)`,
        [pid, items],
      );
      const stampedMs = Math.floor(rows[0].ms);
      // The window ends after the held items' stamp, and the clock is past that end.
      const end = stampedMs + 1;
      while ((await dbNow()) <= end) await sleep(2);
      // Lag 0 as the runner reads it: the push is not committed, the head has not moved.
      const lag = await b.http('GET', `/api/v1/consumer-groups/${GROUP}?queue=${encodeURIComponent((await b.sql.query('select queue_name from queen.partitions where id = $1', [pid])).rows[0].queue_name)}`);
      expect(lag.body.partitions.map((p: any) => Number(p.lag))).toEqual([0]);

      let answered = false;
      const pending = flush(qid, pid, closing(sink, version, end)).finally(() => (answered = true));
      await sleep(300);
      // Waiting on the allocator's lock, not answering on what it cannot see.
      expect(answered).toBe(false);
      await held.query('commit');
      const res = await pending;
      expect(res).toMatchObject({ success: false, code: 'FLUSH_DEFERRED', state_ops_applied: 0, push_results: [], ack_result: null });
      expect(res.error).toContain('not consumed yet');
    } finally {
      await held.query('rollback').catch(() => undefined);
      held.release();
    }
    // Nothing written: the row at its version, the sink empty.
    expect(await stateVersions(qid, pid)).toEqual([['w', version]]);
    expect(await count(sink)).toBe(0);
  });

  it('I28.1 a committed message beyond the cursor stamped before flush_before defers; consumed, the same flush commits', async () => {
    const { qid, pid, src, sink, version } = await consumedPartition();
    const pushed = await b.http('POST', '/api/v1/push', { items: [{ queue: src, payload: { n: 1 } }] });
    expect(pushed.status).toBe(201);
    const end = (await dbNow()) + 1;
    while ((await dbNow()) <= end) await sleep(2);
    // Leased but not acked counts as pending too.
    const popped = await b.http('GET', `/api/v1/pop/queue/${src}?batch=10&consumerGroup=${GROUP}`);
    expect(popped.status).toBe(200);
    expect((await flush(qid, pid, closing(sink, version, end))).code).toBe('FLUSH_DEFERRED');
    const msg = popped.body.messages[0];
    const ack = await b.http('POST', '/api/v1/ack', { transactionId: msg.transactionId, partitionId: msg.partitionId, leaseId: msg.leaseId, consumerGroup: GROUP, status: 'completed' });
    expect(ack.status).toBe(200);
    const res = await flush(qid, pid, closing(sink, version, end));
    expect(res.success).toBe(true);
    expect(res.push_counts).toEqual({ queued: 1, duplicate: 0 });
    expect(await stateVersions(qid, pid)).toEqual([]);
  });

  it('I28.1 a message stamped at or after flush_before does not hold the flush back', async () => {
    const { qid, pid, src, sink, version } = await consumedPartition();
    const end = await dbNow();
    while ((await dbNow()) <= end) await sleep(2);
    const pushed = await b.http('POST', '/api/v1/push', { items: [{ queue: src, payload: { n: 1 } }] });
    expect(pushed.status).toBe(201);
    expect((await flush(qid, pid, closing(sink, version, end))).success).toBe(true);
  });

  it('I28.1 flush_before ahead of the broker clock defers (a push yet to come could be stamped before it)', async () => {
    const { qid, pid, sink, version } = await consumedPartition();
    const res = await flush(qid, pid, closing(sink, version, (await dbNow()) + 60_000));
    expect(res.code).toBe('FLUSH_DEFERRED');
    expect(await stateVersions(qid, pid)).toEqual([['w', version]]);
    // Counted as deferred, not as a failure, and not as the query's error.
    const metrics = await b.http('GET', '/metrics');
    expect(String(metrics.body)).toMatch(/queen_streams_cycles_total\{result="deferred"\} [1-9]/);
    const counters = await b.http('GET', '/streams/v1/counters');
    expect(JSON.stringify(counters.body)).not.toContain('FLUSH_DEFERRED');
  });

  it('I28.1 the guard lets the source partition lock go once granted: a push locking a sink partition, then the source one (ascending ids), does not deadlock with a guarded flush', async () => {
    const { qid, pid, sink, version } = await consumedPartition();
    // A sink partition whose id sorts below the source partition's: a push naming both locks it first.
    let target: { name: string; id: string } | undefined;
    for (let i = 0; !target; i++) {
      const pushed = await b.http('POST', '/api/v1/push', { items: [{ queue: sink, partition: `k${i}`, payload: { seed: i } }] });
      if (pushed.body[0].partition_id < pid) target = { name: `k${i}`, id: pushed.body[0].partition_id };
    }
    const before = await count(sink);
    const push = await b.sql.connect();
    try {
      await push.query('begin');
      await push.query('select 1 from queen.partitions where id = $1 for update', [target.id]);
      const end = await dbNow();
      const pending = b.http('POST', '/streams/v1/cycle', {
        query_id: qid, partition_id: pid, consumer_group: GROUP, ack: null,
        state_ops: [{ type: 'delete', key: 'w', expected_version: version }],
        push_items: [{ queue: sink, partition: target.name, payload: { closed: true }, transactionId: 'emit-w' }],
        flush_before: end,
      });
      // The flush passes its guard and waits for the sink partition; the push then takes the source partition.
      await sleep(300);
      await push.query('select 1 from queen.partitions where id = $1 for update', [pid]);
      await push.query('commit');
      const res = await pending;
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.success).toBe(true);
    } finally {
      await push.query('rollback').catch(() => undefined);
      push.release();
    }
    expect(await count(sink)).toBe(before + 1);
  });

  it('I28.1 flush_before on a cycle with an ack is refused (400 VALIDATION_FAILED)', async () => {
    const res = await b.http('POST', '/streams/v1/cycle', {
      query_id: '00000000-0000-4000-8000-000000000001',
      partition_id: '00000000-0000-4000-8000-000000000002',
      ack: { transactionId: 't' },
      flush_before: 1,
    });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('VALIDATION_FAILED');
    expect(JSON.stringify(res.body.details)).toContain('flush_before');
  });

  it('createdAt never decreases with the offset in a partition, under concurrent pushes (why the guard reads one message)', async () => {
    const q = uniqueName('fg-mono');
    await Promise.all(
      Array.from({ length: 12 }, (_, i) => b.http('POST', '/api/v1/push', { items: Array.from({ length: 20 }, (_, j) => ({ queue: q, payload: { i, j } })) })),
    );
    const { rows } = await b.sql.query(
      `select count(*)::int as n, count(*) filter (where inverted)::int as inverted
         from (select m.created_at < lag(m.created_at) over (order by m.msg_offset) as inverted
                 from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1) x`,
      [q],
    );
    expect(rows[0]).toEqual({ n: 240, inverted: 0 });
  });
});

describe("a join's idle flush guard (flush_sources)", () => {
  /** A join's query over `left` and `right`, and its shard (no partition) holding one row. */
  async function joinShard() {
    const left = uniqueName('fg-left');
    const right = uniqueName('fg-right');
    const reg = await b.http('POST', '/streams/v1/queries', { name: uniqueName('fg-join'), source_queue: left, config_hash: 'h' });
    expect(reg.status).toBe(200);
    const qid = reg.body.query_id as string;
    const shard = crypto.randomUUID();
    const opened = await flush(qid, shard, { state_ops: [{ type: 'upsert', key: '__join__', value: { held: 1 } }] });
    expect(opened.success).toBe(true);
    const version = opened.state_results[0].version as number;
    const expire = (flushBefore: number, v = version) => ({
      state_ops: [{ type: 'upsert', key: '__join__', value: { held: 0 }, expected_version: v }],
      flush_before: flushBefore,
      flush_sources: [
        { queue: left, partition: 'eu' },
        { queue: right, partition: 'eu' },
      ],
    });
    return { qid, shard, left, right, version, expire };
  }

  const partitionRows = async (queues: string[]) =>
    (await b.sql.query('select count(*)::int as n from queen.partitions where queue_name = any($1)', [queues])).rows[0].n as number;

  it('sources that do not exist have nothing pending: the flush commits and creates neither queue nor partition', async () => {
    const { qid, shard, left, right, expire } = await joinShard();
    const res = await flush(qid, shard, expire(await dbNow()));
    expect(res).toMatchObject({ success: true, state_ops_applied: 1 });
    expect(await partitionRows([left, right])).toBe(0);
    expect((await b.sql.query('select count(*)::int as n from queen.queues where name = any($1)', [[left, right]])).rows[0].n).toBe(0);
  });

  it("a message stamped before flush_before on either queue's partition defers until the group has consumed it", async () => {
    const { qid, shard, left, right, version, expire } = await joinShard();
    for (const queue of [left, right]) {
      expect((await b.http('POST', '/api/v1/push', { items: [{ queue, partition: 'eu', payload: { queue } }] })).status).toBe(201);
    }
    const before = (await dbNow()) + 1;
    while ((await dbNow()) <= before) await sleep(2);
    expect(await flush(qid, shard, expire(before))).toMatchObject({ success: false, code: 'FLUSH_DEFERRED', state_ops_applied: 0 });
    // The left consumed, the right still pending: deferred.
    expect((await b.http('GET', `/api/v1/pop/queue/${left}?batch=10&autoAck=true&consumerGroup=${GROUP}`)).status).toBe(200);
    expect(await flush(qid, shard, expire(before))).toMatchObject({ success: false, code: 'FLUSH_DEFERRED' });
    // Both consumed: the same flush commits.
    expect((await b.http('GET', `/api/v1/pop/queue/${right}?batch=10&autoAck=true&consumerGroup=${GROUP}`)).status).toBe(200);
    expect(await flush(qid, shard, expire(before))).toMatchObject({ success: true, state_ops_applied: 1 });
    expect(await stateVersions(qid, shard)).toEqual([['__join__', version + 1]]);
  });

  it("an application's open transaction creating the right queue's partition and a message in it: the flush waits for it, then defers", async () => {
    const { qid, shard, right, version, expire } = await joinShard();
    const app = await b.sql.connect();
    try {
      // Held open on purpose: the partition and its message exist only inside this transaction.
      await app.query('begin');
      await app.query('select * from queen.app_enqueue_v1($1::jsonb)', [JSON.stringify([{ queue: right, partition: 'eu', payload: { paid: true } }])]);
      const before = (await dbNow()) + 1;
      while ((await dbNow()) <= before) await sleep(2);
      let answered = false;
      const pending = flush(qid, shard, expire(before)).finally(() => (answered = true));
      await sleep(300);
      // Not answering on a partition it cannot see yet: waiting on its creator.
      expect(answered).toBe(false);
      await app.query('commit');
      expect(await pending).toMatchObject({ success: false, code: 'FLUSH_DEFERRED', state_ops_applied: 0 });
    } finally {
      await app.query('rollback').catch(() => undefined);
      app.release();
    }
    expect(await stateVersions(qid, shard)).toEqual([['__join__', version]]);
    // Rolled back instead, the creator leaves nothing pending, and the flush leaves no partition behind.
    const { qid: q2, shard: s2, right: r2, expire: e2 } = await joinShard();
    const app2 = await b.sql.connect();
    try {
      await app2.query('begin');
      await app2.query('select * from queen.app_enqueue_v1($1::jsonb)', [JSON.stringify([{ queue: r2, partition: 'eu', payload: { paid: true } }])]);
      const before = (await dbNow()) + 1;
      while ((await dbNow()) <= before) await sleep(2);
      const pending = flush(q2, s2, e2(before));
      await sleep(200);
      await app2.query('rollback');
      expect(await pending).toMatchObject({ success: true, state_ops_applied: 1 });
    } finally {
      app2.release();
    }
    expect(await partitionRows([r2])).toBe(0);
  });

  it('flush_sources without flush_before is refused (400 VALIDATION_FAILED)', async () => {
    const res = await b.http('POST', '/streams/v1/cycle', {
      query_id: '00000000-0000-4000-8000-000000000001',
      partition_id: '00000000-0000-4000-8000-000000000002',
      ack: null,
      flush_sources: [{ queue: 'q', partition: 'p' }],
    });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('VALIDATION_FAILED');
    expect(JSON.stringify(res.body.details)).toContain('flush_sources');
  });
});
