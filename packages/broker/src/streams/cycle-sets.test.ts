import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// A cycle's sink pushes go through queen.log_push_many_v1 (one run per target
// partition) and its state ops are one compare-and-set over distinct keys
// (queen_streams.apply_state_ops_v1). The route resolves push_items into the
// allocator's sink_items before the cycle statement; the SQL takes no other form.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

async function registerQuery(): Promise<string> {
  const res = await b.http('POST', '/streams/v1/queries', { name: uniqueName('sets'), source_queue: 'src', config_hash: 'h' });
  expect(res.status).toBe(200);
  return res.body.query_id;
}

async function stored(queue: string) {
  const { rows } = await b.sql.query(
    `select p.name as partition, m.msg_offset::text as offset, coalesce(m.transaction_id, m.id::text) as transaction_id, m.payload
       from queen.messages m join queen.partitions p on p.id = m.partition_id
      where p.queue_name = $1 order by p.name, m.msg_offset`, [queue]);
  return rows;
}

const partitionIdOf = async (queue: string, partition: string) =>
  (await b.sql.query('select id::text from queen.partitions where queue_name = $1 and name = $2', [queue, partition])).rows[0]?.id as string;

describe('cycle sink pushes, set-based', () => {
  it('route: outputs to two partitions keep item order, offsets, dedup (in-cycle and retained) and trace ids', async () => {
    const qid = await registerQuery();
    const sink = uniqueName('sink');
    // A retained message with transactionId "kept" in partition a.
    expect((await b.http('POST', '/api/v1/push', { items: [{ queue: sink, partition: 'a', payload: 'old', transactionId: 'kept' }] })).status).toBe(201);
    const trace = '11111111-1111-4111-8111-111111111111';
    const res = await b.http('POST', '/streams/v1/cycle', {
      query_id: qid,
      partition_id: '00000000-0000-4000-8000-0000000000a1',
      ack: null,
      push_items: [
        { queue: sink, partition: 'b', payload: { n: 1 }, transactionId: 'x1', traceId: trace },
        { queue: sink, partition: 'a', payload: { n: 2 } },
        { queue: sink, partition: 'a', payload: { n: 3 }, transactionId: 'kept' },
        { queue: sink, partition: 'b', payload: { n: 4 }, transactionId: 'x1' },
        { queue: sink, partition: 'a', payload: { n: 5 }, transactionId: 'x5' },
      ],
    });
    expect(res.status).toBe(200);
    const pa = await partitionIdOf(sink, 'a');
    const pb = await partitionIdOf(sink, 'b');
    const r = res.body.push_results;
    expect(r.map((x: any) => [x.index, x.status, x.offset, x.partition_id, x.queueName])).toEqual([
      [0, 'queued', '1', pb, sink],
      [1, 'queued', '2', pa, sink],
      [2, 'duplicate', '1', pa, sink],
      [3, 'duplicate', '1', pb, sink],
      [4, 'queued', '3', pa, sink],
    ]);
    expect(r[0]).toMatchObject({ transaction_id: 'x1', trace_id: trace });
    expect(r[1].transaction_id).toBe(r[1].message_id);
    expect(r[1].trace_id).toBeNull();
    expect(r[2]).toMatchObject({ transaction_id: 'kept' });
    expect(r[2]).not.toHaveProperty('trace_id');
    expect(r[3].message_id).toBe(r[0].message_id);
    expect(await stored(sink)).toEqual([
      { partition: 'a', offset: '1', transaction_id: 'kept', payload: 'old' },
      { partition: 'a', offset: '2', transaction_id: r[1].message_id, payload: { n: 2 } },
      { partition: 'a', offset: '3', transaction_id: 'x5', payload: { n: 5 } },
      { partition: 'b', offset: '1', transaction_id: 'x1', payload: { n: 1 } },
    ]);
  });

  it('push_result_detail "counts" answers the counts only (what a runner reads); the default carries them too', async () => {
    const qid = await registerQuery();
    const sink = uniqueName('sink-counts');
    const items = [{ queue: sink, payload: 1, transactionId: 'c1' }, { queue: sink, payload: 2, transactionId: 'c1' }, { queue: sink, payload: 3 }];
    const counts = await b.http('POST', '/streams/v1/cycle', { query_id: qid, partition_id: '00000000-0000-4000-8000-0000000000a4', ack: null, push_items: items, push_result_detail: 'counts' });
    expect(counts.body).toMatchObject({ success: true, push_results: [], push_counts: { queued: 2, duplicate: 1 } });
    const full = await b.http('POST', '/streams/v1/cycle', { query_id: qid, partition_id: '00000000-0000-4000-8000-0000000000a4', ack: null, push_items: items });
    expect(full.body.push_counts).toEqual({ queued: 1, duplicate: 2 });
    expect(full.body.push_results.map((r: any) => r.status)).toEqual(['duplicate', 'duplicate', 'queued']);
    expect((await stored(sink)).map((r) => r.payload)).toEqual([1, 3, 3]);
    const bad = await b.http('POST', '/streams/v1/cycle', { query_id: qid, partition_id: '00000000-0000-4000-8000-0000000000a4', ack: null, push_result_detail: 'some' });
    expect(bad.status).toBe(400);
  });

  it('push_result_detail "duplicates" answers the counts and only the items answered duplicate, with their index', async () => {
    const qid = await registerQuery();
    const sink = uniqueName('sink-dups');
    const pid = '00000000-0000-4000-8000-0000000000a5';
    const first = await b.http('POST', '/streams/v1/cycle', { query_id: qid, partition_id: pid, ack: null, push_items: [{ queue: sink, payload: 1, transactionId: 'd1' }], push_result_detail: 'duplicates' });
    expect(first.body).toMatchObject({ success: true, push_results: [], push_counts: { queued: 1, duplicate: 0 } });
    const items = [{ queue: sink, payload: 2, transactionId: 'd2' }, { queue: sink, payload: 1, transactionId: 'd1' }, { queue: sink, payload: 3 }];
    const again = await b.http('POST', '/streams/v1/cycle', { query_id: qid, partition_id: pid, ack: null, push_items: items, push_result_detail: 'duplicates' });
    expect(again.body.push_counts).toEqual({ queued: 2, duplicate: 1 });
    expect(again.body.push_results).toEqual([expect.objectContaining({ index: 1, transaction_id: 'd1', status: 'duplicate', queueName: sink })]);
  });

  it('raw SQL: an element carrying push_items instead of sink_items is refused, and writes nothing', async () => {
    const qid = await registerQuery();
    const sink = uniqueName('sink-raw');
    expect((await b.http('POST', '/api/v1/push', { items: [{ queue: sink, partition: 'p', payload: 0 }] })).status).toBe(201);
    const element = JSON.stringify([{ idx: 7, query_id: qid, partition_id: '00000000-0000-4000-8000-0000000000a2', ack: null, state_ops: [{ type: 'upsert', key: 'k', value: 1 }], push_items: [{ queue: sink, partition: 'p', payload: { n: 1 } }] }]);
    await expect(b.sql.query('select queen.log_streams_cycle_v1($1::jsonb)', [element])).rejects.toMatchObject({ code: '22023' });
    expect(await stored(sink)).toHaveLength(1);
    const state = await b.sql.query('select count(*)::int as n from queen_streams.state where query_id = $1', [qid]);
    expect(state.rows[0].n).toBe(0);
  });
});

describe('cycle state ops, set-based', () => {
  it('distinct keys: a failed expectation in the middle names its key, and nothing of the element is written', async () => {
    const qid = await registerQuery();
    const pid = '00000000-0000-4000-8000-0000000000a3';
    const first = await b.http('POST', '/streams/v1/cycle', {
      query_id: qid, partition_id: pid, ack: null,
      state_ops: [{ type: 'upsert', key: 'a', value: 1 }, { type: 'upsert', key: 'b', value: 2 }, { type: 'upsert', key: 'c', value: 3, expected_version: 0 }],
    });
    expect(first.body).toMatchObject({ success: true, state_ops_applied: 3 });
    const v = Object.fromEntries(first.body.state_results.map((r: any) => [r.key, r.version]));
    expect(first.body.state_results.map((r: any) => r.key)).toEqual(['a', 'b', 'c']);

    const sink = uniqueName('sink-cas');
    const failed = await b.http('POST', '/streams/v1/cycle', {
      query_id: qid, partition_id: pid, ack: null,
      state_ops: [
        { type: 'delete', key: 'a', expected_version: v.a },
        { type: 'upsert', key: 'b', value: 20, expected_version: v.b + 1000 },
        { type: 'upsert', key: 'd', value: 4, expected_version: 0 },
      ],
      push_items: [{ queue: sink, payload: 'must not land' }],
    });
    expect(failed.body).toMatchObject({ success: false, code: 'VERSION_CONFLICT', key: 'b', currentVersion: v.b, state_ops_applied: 0, push_results: [] });
    // SQL answers the code and fields; the broker words it from the catalogue.
    expect(failed.body.error).toBe(`Version conflict on b (expected version ${v.b + 1000}, current ${v.b})`);
    const rows = (await b.sql.query('select key, value, version::int from queen_streams.state where query_id = $1 order by key', [qid])).rows;
    expect(rows).toEqual([{ key: 'a', value: 1, version: v.a }, { key: 'b', value: 2, version: v.b }, { key: 'c', value: 3, version: v.c }]);
    expect(await stored(sink)).toEqual([]);

    const ok = await b.http('POST', '/streams/v1/cycle', {
      query_id: qid, partition_id: pid, ack: null,
      state_ops: [{ type: 'delete', key: 'a', expected_version: v.a }, { type: 'upsert', key: 'b', value: 20, expected_version: v.b }, { type: 'delete', key: 'zz' }],
    });
    expect(ok.body.state_results).toEqual([
      { key: 'a', type: 'delete', version: null },
      { key: 'b', type: 'upsert', version: expect.any(Number) },
      { key: 'zz', type: 'delete', version: null },
    ]);
    expect(ok.body.state_results[1].version).toBeGreaterThan(v.c);
    expect((await b.sql.query('select key from queen_streams.state where query_id = $1 order by key', [qid])).rows.map((r) => r.key)).toEqual(['b', 'c']);
  });
});
