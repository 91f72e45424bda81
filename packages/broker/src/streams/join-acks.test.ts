import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// A join's cycle (PROTOCOL §7.4 extension `source_acks`): its state lives on a
// shard of its own (partition_id names no partition), and one element acks
// the batches of both source queues with the state and the pushes, all or
// nothing, each ack fenced by its own lease.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

const group = 'g';

async function push(queue: string, payloads: unknown[], partition = 'p1') {
  const res = await b.http('POST', '/api/v1/push', { items: payloads.map((payload) => ({ queue, partition, payload })) });
  expect(res.status).toBe(201);
}

async function pop(queue: string, partition = 'p1') {
  const res = await b.http('GET', `/api/v1/pop/queue/${queue}/partition/${partition}?batch=10&wait=false&consumerGroup=${group}`);
  expect(res.status).toBe(200);
  return res.body.messages as { transactionId: string; leaseId: string; partitionId: string; offset: string }[];
}

async function cursor(queue: string) {
  const { rows } = await b.sql.query(
    `select c.cursor_offset::int as cursor from queen.cursors c join queen.partitions p on p.id = c.partition_id where p.queue_name = $1 and c.consumer_group = $2`,
    [queue, group],
  );
  return rows[0]?.cursor ?? 0;
}

async function sinkCount(queue: string) {
  const { rows } = await b.sql.query(`select count(*)::int as n from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1`, [queue]);
  return rows[0].n as number;
}

async function setup() {
  const left = uniqueName('jl');
  const right = uniqueName('jr');
  const sink = uniqueName('js');
  const reg = await b.http('POST', '/streams/v1/queries', { name: uniqueName('jq'), source_queue: left, config_hash: 'h' });
  expect(reg.status).toBe(200);
  await push(left, [1, 2, 3]);
  await push(right, [10, 20]);
  return { left, right, sink, qid: reg.body.query_id as string, shard: randomUUID(), l: await pop(left), r: await pop(right) };
}

const ackOf = (msgs: { transactionId: string; leaseId: string; partitionId: string }[]) => {
  const last = msgs[msgs.length - 1]!;
  return { partition_id: last.partitionId, transactionId: last.transactionId, leaseId: last.leaseId };
};

describe('cycle source_acks (joins)', () => {
  it('acks both source partitions with the state and the pushes in one element; a replay applies nothing', async () => {
    const s = await setup();
    const body = {
      query_id: s.qid,
      partition_id: s.shard,
      consumer_group: group,
      state_ops: [{ type: 'upsert', key: 'k', value: { n: 1 }, expected_version: 0 }],
      push_items: [{ queue: s.sink, partition: 'p1', payload: { pair: 1 }, transactionId: 'pair-1' }],
      ack: null,
      source_acks: [ackOf(s.l), ackOf(s.r)],
    };
    const res = await b.http('POST', '/streams/v1/cycle', body);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ success: true, state_ops_applied: 1, ack_result: null, queueName: null });
    expect(res.body.source_ack_results.map((a: any) => [a.queueName, a.count, a.offset, a.lease_released])).toEqual([
      [s.left, 3, '3', true],
      [s.right, 2, '2', true],
    ]);
    expect([await cursor(s.left), await cursor(s.right), await sinkCount(s.sink)]).toEqual([3, 2, 1]);
    const rows = (await b.http('POST', '/streams/v1/state/get', { query_id: s.qid, partition_id: s.shard })).body.rows;
    expect(rows.map((r: any) => [r.key, r.value])).toEqual([['k', { n: 1 }]]);

    const replay = await b.http('POST', '/streams/v1/cycle', { ...body, state_ops: [{ type: 'upsert', key: 'k', value: { n: 2 } }] });
    expect(replay.body).toMatchObject({ success: false, code: 'LEASE_EXPIRED', state_ops_applied: 0 });
    expect([await cursor(s.left), await cursor(s.right), await sinkCount(s.sink)]).toEqual([3, 2, 1]);
    const after = (await b.http('POST', '/streams/v1/state/get', { query_id: s.qid, partition_id: s.shard })).body.rows;
    expect(after.map((r: any) => r.value)).toEqual([{ n: 1 }]);
  });

  it("one stale lease fails the whole element: neither source's cursor moves, no state, no push", async () => {
    const s = await setup();
    const res = await b.http('POST', '/streams/v1/cycle', {
      query_id: s.qid,
      partition_id: s.shard,
      consumer_group: group,
      state_ops: [{ type: 'upsert', key: 'k', value: 1 }],
      push_items: [{ queue: s.sink, partition: 'p1', payload: 1, transactionId: 'x' }],
      ack: null,
      source_acks: [ackOf(s.l), { ...ackOf(s.r), leaseId: randomUUID() }],
    });
    expect(res.body).toMatchObject({ success: false, code: 'LEASE_EXPIRED', state_ops_applied: 0 });
    expect([await cursor(s.left), await cursor(s.right)]).toEqual([0, 0]);
    expect((await b.http('POST', '/streams/v1/state/get', { query_id: s.qid, partition_id: s.shard })).body.rows).toEqual([]);
    const { rows } = await b.sql.query(`select count(*)::int as n from queen.partitions where queue_name = $1`, [s.sink]);
    // The sink's partition is created before the transaction (PROTOCOL §4); its message is not.
    expect(rows[0].n).toBeLessThanOrEqual(1);
  });

  it('acks one source alone (a batch of one side), on the shard of neither', async () => {
    const s = await setup();
    const res = await b.http('POST', '/streams/v1/cycle', { query_id: s.qid, partition_id: s.shard, consumer_group: group, ack: null, source_acks: [ackOf(s.r)] });
    expect(res.body).toMatchObject({ success: true });
    expect([await cursor(s.left), await cursor(s.right)]).toEqual([0, 2]);
  });

  it('refuses a source ack on the shard itself, two on one partition, and one beside flush_before (400, nothing applied)', async () => {
    const s = await setup();
    const a = ackOf(s.l);
    for (const bad of [
      { source_acks: [{ ...a, partition_id: s.shard }] },
      { source_acks: [a, a] },
      { source_acks: [a], flush_before: 1 },
      { source_acks: [] },
    ]) {
      const res = await b.http('POST', '/streams/v1/cycle', { query_id: s.qid, partition_id: s.shard, consumer_group: group, ack: null, ...bad });
      expect(res.status, JSON.stringify(bad)).toBe(400);
      expect(res.body.code).toBe('VALIDATION_FAILED');
    }
    expect(await cursor(s.left)).toBe(0);
  });
});
