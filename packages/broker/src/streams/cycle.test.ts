import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, sleep, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// POST /streams/v1/cycle and queen.log_streams_cycle_v1 (PROTOCOL §7.4, §8)
// over HTTP against a real PostgreSQL.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

async function registerQuery(): Promise<string> {
  const res = await b.http('POST', '/streams/v1/queries', { name: uniqueName('cq'), source_queue: 'src', config_hash: 'h' });
  expect(res.status).toBe(200);
  return res.body.query_id;
}

async function cycle(body: Record<string, unknown>) {
  const res = await b.http('POST', '/streams/v1/cycle', body);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}

async function state(qid: string, pid: string) {
  const res = await b.http('POST', '/streams/v1/state/get', { query_id: qid, partition_id: pid });
  expect(res.status).toBe(200);
  return res.body.rows as { key: string; value: unknown; version: number; updated_at: string }[];
}

async function push(queue: string, items: Record<string, unknown>[], partition = 'Default') {
  const res = await b.http('POST', '/api/v1/push', { items: items.map((i) => ({ queue, partition, ...i })) });
  expect(res.status).toBe(201);
  return res.body as any[];
}

async function sinkMessages(queue: string) {
  const { rows } = await b.sql.query(
    `select m.msg_offset::int as offset, coalesce(m.transaction_id, m.id::text) as transaction_id, m.payload, m.producer_sub
       from queen.messages m join queen.partitions p on p.id = m.partition_id
      where p.queue_name = $1 order by m.partition_id, m.msg_offset`,
    [queue],
  );
  return rows;
}

async function cursorRow(queue: string, group: string) {
  const { rows } = await b.sql.query(
    `select c.cursor_offset::int as cursor, c.lease_id, (c.lease_id is not null and c.lease_expires_at > now()) as leased
       from queen.cursors c join queen.partitions p on p.id = c.partition_id
      where p.queue_name = $1 and c.consumer_group = $2`,
    [queue, group],
  );
  return rows[0] as { cursor: number; lease_id: string | null; leased: boolean } | undefined;
}

/** Everything "nothing changed" compares for one scenario. */
async function snapshot(qid: string, pid: string, sink: string, src: string, group: string) {
  return { state: await state(qid, pid), sink: await sinkMessages(sink), cursor: await cursorRow(src, group) };
}

async function pop(queue: string, params: string) {
  return b.http('GET', `/api/v1/pop/queue/${queue}?${params}`);
}

describe('state ops', () => {
  it('S34 state ops apply in array order; versions only grow; expected_version is a compare-and-set', async () => {
    const qid = await registerQuery();
    const pid = '00000000-0000-4000-8000-000000000034';
    const sink = uniqueName('sink');

    const first = await cycle({
      query_id: qid,
      partition_id: pid,
      ack: null,
      state_ops: [
        { type: 'upsert', key: 'k1', value: { n: 1 } },
        { type: 'upsert', key: 'k2', value: { n: 2 } },
        { type: 'delete', key: 'k1' },
      ],
    });
    expect(first).toMatchObject({ success: true, query_id: qid, partition_id: pid, state_ops_applied: 3, push_results: [], ack_result: null });
    expect(first.state_results.map((r: any) => [r.key, r.type])).toEqual([
      ['k1', 'upsert'],
      ['k2', 'upsert'],
      ['k1', 'delete'],
    ]);
    expect(first.state_results[2].version).toBeNull();
    const v = first.state_results[1].version as number;
    expect(first.state_results[0].version).toBeLessThan(v);
    expect(await state(qid, pid)).toEqual([expect.objectContaining({ key: 'k2', value: { n: 2 }, version: v })]);

    const cas = await cycle({ query_id: qid, partition_id: pid, state_ops: [{ type: 'upsert', key: 'k2', value: { n: 3 }, expected_version: v }] });
    expect(cas.success).toBe(true);
    const v2 = cas.state_results[0].version as number;
    expect(v2).toBeGreaterThan(v);

    const stale = await cycle({
      query_id: qid,
      partition_id: pid,
      state_ops: [
        { type: 'upsert', key: 'k5', value: 'applied first, rolled back' },
        { type: 'upsert', key: 'k2', value: { n: 4 }, expected_version: v },
      ],
      push_items: [{ queue: sink, payload: { emit: 1 } }],
    });
    expect(stale).toMatchObject({ success: false, code: 'VERSION_CONFLICT', state_ops_applied: 0, push_results: [], ack_result: null, key: 'k2', currentVersion: v2 });
    expect(await sinkMessages(sink)).toEqual([]);
    expect(await state(qid, pid)).toEqual([expect.objectContaining({ key: 'k2', value: { n: 3 }, version: v2 })]);

    const absentDelete = await cycle({ query_id: qid, partition_id: pid, state_ops: [{ type: 'delete', key: 'k9', expected_version: 5 }] });
    expect(absentDelete).toMatchObject({ success: false, code: 'VERSION_CONFLICT', currentVersion: 0 });

    const create = await cycle({ query_id: qid, partition_id: pid, state_ops: [{ type: 'upsert', key: 'k3', value: 1, expected_version: 0 }] });
    expect(create.success).toBe(true);
    const v3 = create.state_results[0].version as number;
    const createAgain = await cycle({ query_id: qid, partition_id: pid, state_ops: [{ type: 'upsert', key: 'k3', value: 2, expected_version: 0 }] });
    expect(createAgain).toMatchObject({ success: false, code: 'VERSION_CONFLICT', currentVersion: v3 });

    // Delete and re-create: the new version is never a reused one.
    expect((await cycle({ query_id: qid, partition_id: pid, state_ops: [{ type: 'delete', key: 'k3', expected_version: v3 }] })).success).toBe(true);
    const recreated = await cycle({ query_id: qid, partition_id: pid, state_ops: [{ type: 'upsert', key: 'k3', value: 3, expected_version: 0 }] });
    expect(recreated.state_results[0].version).toBeGreaterThan(v3);
    const deleteOld = await cycle({ query_id: qid, partition_id: pid, state_ops: [{ type: 'delete', key: 'k3', expected_version: v3 }] });
    expect(deleteOld.code).toBe('VERSION_CONFLICT');
    // Absent key without expected_version: delete is a no-op that applies.
    expect(await cycle({ query_id: qid, partition_id: pid, state_ops: [{ type: 'delete', key: 'never' }] })).toMatchObject({ success: true, state_ops_applied: 1 });
  });

  it('S34 unknown query_id fails the element with QUERY_NOT_FOUND and writes nothing', async () => {
    const res = await cycle({
      query_id: '00000000-0000-4000-8000-00000000beef',
      partition_id: '00000000-0000-4000-8000-000000000001',
      state_ops: [{ type: 'upsert', key: 'k', value: 1 }],
    });
    expect(res).toMatchObject({ success: false, code: 'QUERY_NOT_FOUND', state_ops_applied: 0 });
    const { rows } = await b.sql.query(`select count(*)::int as n from queen_streams.state where query_id = '00000000-0000-4000-8000-00000000beef'`);
    expect(rows[0].n).toBe(0);
  });
});

describe('ack', () => {
  it('S35 an ack with a wrong leaseId or unknown transactionId rolls the whole element back', async () => {
    const qid = await registerQuery();
    const src = uniqueName('src');
    const sink = uniqueName('sink');
    const group = 'streams.s35';
    const [m0] = await push(src, [{ payload: { a: 1 } }, { payload: { a: 2 } }]);
    const pid = m0.partition_id;
    const popped = await pop(src, `batch=2&consumerGroup=${group}`);
    expect(popped.status).toBe(200);
    const m = popped.body.messages[0];
    const before = await snapshot(qid, pid, sink, src, group);
    expect(before.cursor).toMatchObject({ cursor: 0, leased: true });

    const body = (ack: Record<string, unknown>) => ({
      query_id: qid,
      partition_id: pid,
      consumer_group: group,
      state_ops: [{ type: 'upsert', key: 'k', value: 1 }],
      push_items: [{ queue: sink, payload: { out: 1 } }],
      ack,
    });
    const wrongLease = await cycle(body({ transactionId: m.transactionId, leaseId: '00000000-0000-7000-8000-000000000000' }));
    expect(wrongLease).toMatchObject({ success: false, code: 'LEASE_EXPIRED', error: 'Invalid or expired lease', push_results: [], ack_result: null });
    expect(await snapshot(qid, pid, sink, src, group)).toEqual(before);

    const unknownMsg = await cycle(body({ transactionId: 'no-such-message', leaseId: m.leaseId }));
    expect(unknownMsg).toMatchObject({ success: false, code: 'MESSAGE_NOT_FOUND', error: 'Message not found' });
    expect(await snapshot(qid, pid, sink, src, group)).toEqual(before);

    // The same element with the right lease commits all three parts.
    const ok = await cycle(body({ transactionId: m.transactionId, leaseId: m.leaseId }));
    expect(ok).toMatchObject({ success: true, queueName: src, state_ops_applied: 1, ack_result: { success: true, count: 1, offset: '1', dlq: false, lease_released: true } });
    expect(ok.push_results).toEqual([
      expect.objectContaining({ index: 0, status: 'queued', queueName: sink, offset: '1', partition_id: expect.any(String), message_id: expect.any(String), transaction_id: expect.any(String) }),
    ]);
    expect(await sinkMessages(sink)).toHaveLength(1);
    expect((await sinkMessages(sink))[0].producer_sub).toBeNull(); // auth off: no subject to stamp
    expect(await cursorRow(src, group)).toMatchObject({ cursor: 1, leased: false });
  });

  it('S35 an expired lease fails the ack (LEASE_EXPIRED) even if nobody claimed the partition since', async () => {
    const qid = await registerQuery();
    const src = uniqueName('src');
    const sink = uniqueName('sink');
    const [m0] = await push(src, [{ payload: 1 }]);
    await b.sql.query(`update queen.queues set options = options || '{"leaseTime":1}' where name = $1`, [src]);
    const popped = await pop(src, 'batch=1');
    const m = popped.body.messages[0];
    await eventually(async () => !(await cursorRow(src, '__QUEUE_MODE__'))!.leased, 5000);
    const res = await cycle({
      query_id: qid,
      partition_id: m0.partition_id,
      push_items: [{ queue: sink, payload: 1 }],
      ack: { transactionId: m.transactionId, leaseId: m.leaseId },
    });
    expect(res).toMatchObject({ success: false, code: 'LEASE_EXPIRED' });
    expect(await sinkMessages(sink)).toEqual([]);
    expect((await cursorRow(src, '__QUEUE_MODE__'))!.cursor).toBe(0);
  });

  it('S36 a duplicate sink push reports duplicate and does not fail the element', async () => {
    const qid = await registerQuery();
    const src = uniqueName('src');
    const sink = uniqueName('sink');
    const [orig] = await push(sink, [{ transactionId: 'X', payload: { first: true } }], 'P');
    const [m0] = await push(src, [{ payload: 1 }]);
    const m = (await pop(src, 'batch=1')).body.messages[0];
    const res = await cycle({
      query_id: qid,
      partition_id: m0.partition_id,
      state_ops: [{ type: 'upsert', key: 'k', value: { seen: 1 } }],
      push_items: [
        { queue: sink, partition: 'P', transactionId: 'X', payload: { first: false } },
        { queue: sink, partition: 'P', transactionId: 'Y', payload: { second: true } },
      ],
      ack: { transactionId: m.transactionId, leaseId: m.leaseId },
    });
    expect(res.success).toBe(true);
    expect(res.push_results[0]).toEqual({
      index: 0,
      transaction_id: 'X',
      status: 'duplicate',
      message_id: orig.message_id,
      partition_id: orig.partition_id,
      queueName: sink,
      offset: '1',
    });
    expect(res.push_results[1]).toMatchObject({ index: 1, transaction_id: 'Y', status: 'queued', offset: '2' });
    expect(await state(qid, m0.partition_id)).toEqual([expect.objectContaining({ key: 'k', value: { seen: 1 } })]);
    expect(res.ack_result).toMatchObject({ success: true, count: 1, offset: '1' });
    expect((await cursorRow(src, '__QUEUE_MODE__'))!.cursor).toBe(1);
    const msgs = await sinkMessages(sink);
    expect(msgs.map((x) => [x.transaction_id, x.payload])).toEqual([
      ['X', { first: true }],
      ['Y', { second: true }],
    ]);
  });

  it('a failed or dlq cycle ack dead-letters that message, moves the cursor past it and ends the lease', async () => {
    const qid = await registerQuery();
    const src = uniqueName('src');
    const [m0] = await push(src, [{ payload: 1 }, { payload: 2 }, { payload: 3 }]);
    const popped = await pop(src, 'batch=3');
    const [, second, third] = popped.body.messages;
    const res = await cycle({ query_id: qid, partition_id: m0.partition_id, ack: { transactionId: second.transactionId, leaseId: second.leaseId, status: 'dlq' }, release_lease: false });
    expect(res.ack_result).toEqual({ success: true, count: 2, lease_released: true, dlq: true, offset: '2' });
    expect(await cursorRow(src, '__QUEUE_MODE__')).toMatchObject({ cursor: 2, leased: false });
    const { rows } = await b.sql.query('select msg_offset::int as o from queen.dlq where partition_id = $1', [m0.partition_id]);
    expect(rows).toEqual([{ o: 2 }]);
    const again = await pop(src, 'batch=3');
    expect(again.body.messages.map((x: any) => x.offset)).toEqual(['3']);
    const failed = await cycle({ query_id: qid, partition_id: m0.partition_id, ack: { transactionId: third.transactionId, leaseId: again.body.leaseId, status: 'failed' } });
    expect(failed.ack_result).toMatchObject({ dlq: true, lease_released: true, offset: '3', count: 1 });
    const dlq = await b.sql.query('select msg_offset::int as o from queen.dlq where partition_id = $1 order by 1', [m0.partition_id]);
    expect(dlq.rows).toEqual([{ o: 2 }, { o: 3 }]);
    expect(await cursorRow(src, '__QUEUE_MODE__')).toMatchObject({ cursor: 3, leased: false });
  });

  it('S37 a partial ack of K walks retained messages, keeps the lease, and the tail returns in order on expiry', async () => {
    const { qid, src, pid, popped } = await retainedTail();
    const seventh = popped.messages.find((x: any) => x.offset === '7');
    const res = await cycle({
      query_id: qid,
      partition_id: pid,
      consumer_group: 'G',
      ack: { transactionId: seventh.transactionId, leaseId: popped.leaseId, count: 2 },
      release_lease: false,
    });
    expect(res).toMatchObject({ success: true, ack_result: { success: true, count: 2, lease_released: false, dlq: false, offset: '7' } });
    const group = await b.http('GET', `/api/v1/consumer-groups/G?queue=${src}`);
    expect(group.body.partitions[0]).toMatchObject({ cursor: '7', leased: true });
    expect((await pop(src, 'batch=5&consumerGroup=G')).status).toBe(204);
    const after = await eventually(async () => {
      const r = await pop(src, 'batch=5&consumerGroup=G');
      return r.status === 200 ? r : undefined;
    }, 10000);
    expect(after.body.messages.map((x: any) => [x.offset, x.retryCount])).toEqual([
      ['8', 0],
      ['9', 0],
      ['10', 0],
    ]);
  });

  it('S37 release_lease:false keeps the lease even when the ack reaches the last leased offset', async () => {
    const { qid, pid, src, popped } = await retainedTail();
    const last = popped.messages[popped.messages.length - 1];
    const res = await cycle({ query_id: qid, partition_id: pid, consumer_group: 'G', ack: { transactionId: last.transactionId, leaseId: popped.leaseId, count: 5 }, release_lease: false });
    expect(res.ack_result).toMatchObject({ count: 5, lease_released: false, offset: '10' });
    expect(await cursorRow(src, 'G')).toMatchObject({ cursor: 10, leased: true });
    // The kept lease still fences the partition: a newer message is not delivered until it expires.
    await push(src, [{ payload: 11 }]);
    expect((await pop(src, 'batch=5&consumerGroup=G')).status).toBe(204);
    const replay = await cycle({ query_id: qid, partition_id: pid, consumer_group: 'G', ack: { transactionId: last.transactionId, leaseId: popped.leaseId } });
    expect(replay.code).toBe('ALREADY_ACKED');
    expect(await cursorRow(src, 'G')).toMatchObject({ cursor: 10, leased: true });
  });

  it('S38 ack guards: a count that misses the named message, then a replayed cycle, change nothing', async () => {
    const { qid, src, pid, popped } = await retainedTail();
    const sink = uniqueName('sink');
    const seventh = popped.messages.find((x: any) => x.offset === '7');
    await cycle({ query_id: qid, partition_id: pid, ack: null, state_ops: [{ type: 'upsert', key: 'acc', value: 0 }] });
    const before = await snapshot(qid, pid, sink, src, 'G');
    const body = (count: number) => ({
      query_id: qid,
      partition_id: pid,
      consumer_group: 'G',
      state_ops: [{ type: 'upsert', key: 'acc', value: count }],
      push_items: [{ queue: sink, payload: { count } }], // no transactionId: a replay would append, not dedup
      ack: { transactionId: seventh.transactionId, leaseId: popped.leaseId, count },
      release_lease: false,
    });
    const mismatch = await cycle(body(3));
    expect(mismatch).toMatchObject({ success: false, code: 'ACK_COUNT_MISMATCH', state_ops_applied: 0, push_results: [], ack_result: null });
    expect(await snapshot(qid, pid, sink, src, 'G')).toEqual(before);

    const ok = await cycle(body(2));
    expect(ok).toMatchObject({ success: true, ack_result: { offset: '7', count: 2, lease_released: false } });
    const afterOk = await snapshot(qid, pid, sink, src, 'G');
    expect(afterOk.sink).toHaveLength(1);
    expect(afterOk.cursor).toMatchObject({ cursor: 7, leased: true });

    const replay = await cycle(body(2));
    expect(replay).toMatchObject({ success: false, code: 'ALREADY_ACKED', state_ops_applied: 0, push_results: [] });
    expect(await snapshot(qid, pid, sink, src, 'G')).toEqual(afterOk);
  });

  it('S49 a lost response replayed finds the lease gone: LEASE_EXPIRED, one sink message, version unchanged', async () => {
    const qid = await registerQuery();
    const src = uniqueName('src');
    const sink = uniqueName('sink');
    const [m0] = await push(src, [{ payload: 1 }]);
    const popped = (await pop(src, 'batch=1&consumerGroup=streams.s49')).body;
    const m = popped.messages[0];
    const body = {
      query_id: qid,
      partition_id: m0.partition_id,
      consumer_group: 'streams.s49',
      state_ops: [{ type: 'upsert', key: 'k', value: { count: 1 } }],
      push_items: [{ queue: sink, payload: { count: 1 } }],
      ack: { transactionId: m.transactionId, leaseId: m.leaseId },
      release_lease: true,
    };
    const first = await cycle(body);
    expect(first).toMatchObject({ success: true, ack_result: { lease_released: true, offset: '1' } });
    const version = first.state_results[0].version;
    const replay = await cycle(body);
    expect(replay).toMatchObject({ success: false, code: 'LEASE_EXPIRED', push_results: [] });
    expect(await sinkMessages(sink)).toHaveLength(1);
    expect(await state(qid, m0.partition_id)).toEqual([expect.objectContaining({ key: 'k', version })]);
  });
});

/** S37's setup: offsets 1–5 removed exactly as retention would, 6–10 retained, group G leased on 6–10 with leaseTime 2. */
async function retainedTail() {
  const qid = await registerQuery();
  const src = uniqueName('src');
  const first = await push(src, [1, 2, 3, 4, 5].map((n) => ({ payload: n })));
  const pid = first[0].partition_id;
  await b.sql.query('delete from queen.messages where partition_id = $1 and msg_offset <= 5', [pid]);
  await b.sql.query('delete from queen.log_segments where partition_id = $1 and last_offset <= 5', [pid]);
  await b.sql.query('update queen.partitions set first_offset = 6, segment_first = null where id = $1', [pid]);
  const second = await push(src, [6, 7, 8, 9, 10].map((n) => ({ payload: n })));
  expect(second.map((r) => r.offset)).toEqual(['6', '7', '8', '9', '10']);
  await b.sql.query(`update queen.queues set options = options || '{"leaseTime":2}' where name = $1`, [src]);
  const popped = await pop(src, 'batch=5&consumerGroup=G');
  expect(popped.status).toBe(200);
  expect(popped.body.messages.map((x: any) => x.offset)).toEqual(['6', '7', '8', '9', '10']);
  return { qid, src, pid, popped: popped.body };
}

describe('flush and shard lock', () => {
  it('S39 a flush racing a cycle: only the flush holding the current version emits', async () => {
    const qid = await registerQuery();
    const pid = '00000000-0000-4000-8000-000000000039';
    const sink = uniqueName('sink');
    const v1 = (await cycle({ query_id: qid, partition_id: pid, ack: null, state_ops: [{ type: 'upsert', key: 'R', value: { windowEnd: 1000 }, expected_version: 0 }] }))
      .state_results[0].version;
    const v2 = (await cycle({ query_id: qid, partition_id: pid, state_ops: [{ type: 'upsert', key: 'R', value: { windowEnd: 1000, acc: 2 }, expected_version: v1 }] }))
      .state_results[0].version;
    expect(v2).toBeGreaterThan(v1);
    const flush = (v: number) => ({
      query_id: qid,
      partition_id: pid,
      ack: null,
      state_ops: [{ type: 'delete', key: 'R', expected_version: v }],
      push_items: [{ queue: sink, payload: { window: 1000, v } }],
    });
    expect(await cycle(flush(v1))).toMatchObject({ success: false, code: 'VERSION_CONFLICT' });
    expect(await sinkMessages(sink)).toEqual([]);

    const ok = await cycle(flush(v2));
    expect(ok).toMatchObject({ success: true, state_ops_applied: 1, ack_result: null });
    expect(ok.push_results).toHaveLength(1);
    expect(await sinkMessages(sink)).toHaveLength(1);
    expect(await state(qid, pid)).toEqual([]);

    expect(await cycle({ query_id: qid, partition_id: pid, state_ops: [{ type: 'upsert', key: 'R', value: {}, expected_version: v2 }] })).toMatchObject({
      success: false,
      code: 'VERSION_CONFLICT',
    });
    expect(await cycle(flush(v2))).toMatchObject({ success: false, code: 'VERSION_CONFLICT' });
    expect(await sinkMessages(sink)).toHaveLength(1);
  });

  it('S40 a held shard lock parks cycles of that shard only; the cycle function runs each element in its own savepoint', async () => {
    const qid = await registerQuery();
    const pid = '00000000-0000-4000-8000-000000000040';
    const pid2 = '00000000-0000-4000-8000-000000000041';
    const holder = await b.sql.connect();
    try {
      await holder.query('begin');
      await holder.query(`select pg_advisory_xact_lock(hashtextextended($1, 0))`, [`${qid}:${pid}`]);
      const started = Date.now();
      let doneAt = 0;
      const parked = b
        .http('POST', '/streams/v1/cycle', { query_id: qid, partition_id: pid, state_ops: [{ type: 'upsert', key: 'p', value: 1 }] })
        .then((r) => {
          doneAt = Date.now();
          return r;
        });
      const other = await b.http('POST', '/streams/v1/cycle', { query_id: qid, partition_id: pid2, state_ops: [{ type: 'upsert', key: 'p', value: 2 }] });
      expect(other.body.success).toBe(true);
      await sleep(1100);
      expect(doneAt).toBe(0);
      await holder.query('commit');
      const res = await parked;
      expect(res.body.success).toBe(true);
      expect(doneAt - started).toBeGreaterThan(1000);
    } finally {
      await holder.query('rollback').catch(() => undefined);
      holder.release();
    }

    const elements = [
      { idx: 0, query_id: qid, partition_id: pid, state_ops: [{ type: 'upsert', key: 'a', value: 1 }] },
      { idx: 1, query_id: qid, partition_id: pid, state_ops: [{ type: 'upsert', key: 'c', value: 1 }, { type: 'delete', key: 'b', expected_version: 99 }] },
      { idx: 2, query_id: qid, partition_id: pid2, state_ops: [{ type: 'upsert', key: 'd', value: 1 }] },
    ];
    const { rows } = await b.sql.query('select queen.log_streams_cycle_v1($1::jsonb) as r', [JSON.stringify(elements)]);
    const out = rows[0].r;
    expect(out.map((e: any) => [e.idx, e.result.success, e.result.code ?? null])).toEqual([
      [0, true, null],
      [1, false, 'VERSION_CONFLICT'],
      [2, true, null],
    ]);
    expect((await state(qid, pid)).map((r) => r.key)).toEqual(['a', 'p']); // c rolled back with its element
    expect((await state(qid, pid2)).map((r) => r.key)).toEqual(['d', 'p']);
  });
});

describe('validation', () => {
  it('X6 X11 bad cycle bodies are 400 VALIDATION_FAILED and change nothing', async () => {
    const qid = await registerQuery();
    const pid = '00000000-0000-4000-8000-000000000061';
    const sink = uniqueName('sink');
    const valid = { query_id: qid, partition_id: pid, state_ops: [{ type: 'upsert', key: 'k', value: 1 }], push_items: [{ queue: sink, payload: 1 }], ack: null };
    const cases: [Record<string, unknown>, string][] = [
      [{ ...valid, query_id: 'nope' }, 'body.query_id'],
      [{ ...valid, partition_id: 42 }, 'body.partition_id'],
      [{ ...valid, partition_id: undefined }, 'body.partition_id'],
      [{ ...valid, kv: [{ op: 'incr', namespace: 'n', key: 'k' }] }, 'body.kv'],
      [{ ...valid, kv: [] }, 'body.kv'],
      [{ ...valid, timers: [{ queue: 'q', payload: 1, delayMs: 5 }] }, 'body.timers'],
      [{ ...valid, ack: { transactionId: 't', count: 0 } }, 'body.ack.count'],
      [{ ...valid, ack: { transactionId: 't', count: 1.5 } }, 'body.ack.count'],
      [{ ...valid, ack: { transactionId: 't', status: 'retry' } }, 'body.ack.status'],
      [{ ...valid, ack: { transactionId: 't', leaseId: 'xyz' } }, 'body.ack.leaseId'],
      [{ ...valid, ack: {} }, 'body.ack.transactionId'],
      [{ ...valid, state_ops: [{ type: 'merge', key: 'k' }] }, 'body.state_ops[0].type'],
      [{ ...valid, state_ops: [{ type: 'upsert', key: '' }] }, 'body.state_ops[0].key'],
      [{ ...valid, state_ops: [{ type: 'upsert', key: 'k'.repeat(1025) }] }, 'body.state_ops[0].key'],
      [{ ...valid, state_ops: [{ type: 'upsert', key: 'k', expected_version: -1 }] }, 'body.state_ops[0].expected_version'],
      [{ ...valid, push_items: [{ queue: 5 }] }, 'body.push_items[0].queue'],
      [{ ...valid, release_lease: 'no' }, 'body.release_lease'],
    ];
    for (const [body, field] of cases) {
      const res = await b.http('POST', '/streams/v1/cycle', body);
      expect(res.status, field).toBe(400);
      expect(res.body.code).toBe('VALIDATION_FAILED');
      expect(res.body.details.map((d: any) => d.field), field).toContain(field);
    }
    const malformed = await b.http('POST', '/streams/v1/cycle', '{"items":[');
    expect(malformed.status).toBe(400);
    expect(malformed.body.code).toBe('INVALID_JSON');
    // A key of exactly 1024 chars is fine; nothing of the rejected bodies landed.
    expect(await state(qid, pid)).toEqual([]);
    expect(await sinkMessages(sink)).toEqual([]);
    const { rows } = await b.sql.query('select count(*)::int as n from queen.queues where name = $1', [sink]);
    expect(rows[0].n).toBe(0);
    expect((await cycle({ ...valid, state_ops: [{ type: 'upsert', key: 'k'.repeat(1024), value: 1 }] })).success).toBe(true);
  });

  it('X11 a payload PostgreSQL cannot store is a 400, not a 500', async () => {
    const qid = await registerQuery();
    const res = await b.http('POST', '/streams/v1/cycle', {
      query_id: qid,
      partition_id: '00000000-0000-4000-8000-000000000062',
      state_ops: [{ type: 'upsert', key: 'k', value: { s: 'a\u0000b' } }],
    });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('VALIDATION_FAILED');
  });
});

describe('producer stamp', () => {
  it('cycle sink pushes carry the token subject as producerSub; a producerSub in the body is ignored', async () => {
    const authed = await startTestBroker({
      config: { authEnabled: true, apiKeys: [{ key: 'stream-key', level: 'read-write', subject: 'svc-streams' }] },
    });
    try {
      const auth = { authorization: 'Bearer stream-key' };
      const reg = await authed.http('POST', '/streams/v1/queries', { name: uniqueName('stamp'), source_queue: 'src', config_hash: 'h' }, auth);
      expect(reg.status).toBe(200);
      const sink = uniqueName('sink');
      const res = await authed.http(
        'POST',
        '/streams/v1/cycle',
        {
          query_id: reg.body.query_id,
          partition_id: '00000000-0000-4000-8000-000000000070',
          producer_sub: 'forged',
          push_items: [{ queue: sink, payload: 1, producerSub: 'forged' }],
        },
        auth,
      );
      expect(res.body.success).toBe(true);
      const { rows } = await authed.sql.query(
        'select m.producer_sub from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1',
        [sink],
      );
      expect(rows).toEqual([{ producer_sub: 'svc-streams' }]);
    } finally {
      await authed.stop();
    }
  });
});
