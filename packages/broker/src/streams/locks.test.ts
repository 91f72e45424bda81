import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// Lock order under a mixed concurrent load (PROTOCOL §4, DESIGN §4): stream
// cycles (shard lock → sink append locks → source cursor), idle flushes
// (half of them guarded: they wait for the source partition's append lock),
// plain pushes into the same sink partitions in both orders, pops, resets and
// drops of queries, all at once over HTTP. A deadlock (40P01) would surface as
// a 500; every answer must be a success or an element outcome, and every
// message a cycle reports as queued must be on the sink exactly once.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

const SOURCES = ['P0', 'P1', 'P2', 'P3'];
const SINKS = ['A', 'B', 'C'];

it('mixed cycles, flushes, pushes, pops, resets and drops run concurrently without a deadlock or a 500', async () => {
  const src = uniqueName('src');
  const sink = uniqueName('sink');
  const name = uniqueName('locks');
  const qid = (await b.http('POST', '/streams/v1/queries', { name, source_queue: src, sink_queue: sink, config_hash: 'h' })).body.query_id as string;
  const statuses: number[] = [];
  const queuedByCycles = new Set<string>();
  let plainPushed = 0;
  let acked = 0;

  const call = async (method: string, path: string, body?: unknown) => {
    const res = await b.http(method, path, body);
    statuses.push(res.status);
    expect(res.status, `${method} ${path} ${JSON.stringify(res.body).slice(0, 200)}`).toBeLessThan(500);
    return res;
  };
  const shuffled = <T>(xs: T[]) => [...xs].sort(() => Math.random() - 0.5);

  // Seed every source partition.
  for (const p of SOURCES) await call('POST', '/api/v1/push', { items: Array.from({ length: 20 }, (_, i) => ({ queue: src, partition: p, payload: i })) });
  const { rows: parts } = await b.sql.query('select name, id from queen.partitions where queue_name = $1', [src]);
  const pidOf = new Map(parts.map((r) => [r.name as string, r.id as string]));

  async function streamWorker(p: string) {
    for (let i = 0; i < 12; i++) {
      const pop = await call('GET', `/api/v1/pop/queue/${src}/partition/${p}?batch=5&consumerGroup=streams.${name}`);
      if (pop.status !== 200) continue;
      const last = pop.body.messages[pop.body.messages.length - 1];
      const res = await call('POST', '/streams/v1/cycle', {
        query_id: qid,
        partition_id: pidOf.get(p),
        consumer_group: `streams.${name}`,
        state_ops: [{ type: 'upsert', key: `acc:${p}`, value: { i } }],
        push_items: shuffled(SINKS).map((s) => ({ queue: sink, partition: s, payload: { p, i }, transactionId: `sx-${p}-${last.offset}-${s}` })),
        ack: { transactionId: last.transactionId, leaseId: pop.body.leaseId, count: pop.body.messages.length },
      });
      if (res.body.success) {
        acked += pop.body.messages.length;
        for (const r of res.body.push_results) if (r.status === 'queued') queuedByCycles.add(r.transaction_id);
      }
    }
  }

  async function flusher(k: number) {
    for (let i = 0; i < 15; i++) {
      const p = SOURCES[(k + i) % SOURCES.length]!;
      // Every other flush carries the guard: it waits for the pushers' append lock on its source partition (019).
      const guarded = i % 2 === 1;
      const res = await call('POST', '/streams/v1/cycle', {
        query_id: qid,
        partition_id: pidOf.get(p),
        consumer_group: `streams.${name}`,
        ack: null,
        state_ops: [{ type: 'delete', key: `acc:${p}` }],
        push_items: shuffled(SINKS).map((s) => ({ queue: sink, partition: s, payload: { flush: k, i }, transactionId: `fl-${k}-${i}-${s}` })),
        ...(guarded ? { flush_before: Date.now() - 5 } : {}),
      });
      // No expected_version: a flush without CAS always applies, unless its guard sees a message pending.
      if (guarded && !res.body.success) expect(res.body.code).toBe('FLUSH_DEFERRED');
      else expect(res.body.success).toBe(true);
      for (const r of res.body.push_results) if (r.status === 'queued') queuedByCycles.add(r.transaction_id);
    }
  }

  async function pusher(k: number) {
    for (let i = 0; i < 15; i++) {
      const items = shuffled([...SINKS.map((s) => ({ queue: sink, partition: s })), ...SOURCES.map((p) => ({ queue: src, partition: p }))]).map((t) => ({
        ...t,
        payload: { k, i },
      }));
      await call('POST', '/api/v1/push', { items });
      plainPushed += SINKS.length;
    }
  }

  async function churn() {
    for (let i = 0; i < 10; i++) {
      const other = `${name}-churn-${i}`;
      const r = await call('POST', '/streams/v1/queries', { name: other, source_queue: src, config_hash: 'h' });
      const oqid = r.body.query_id;
      const write = call('POST', '/streams/v1/cycle', {
        query_id: oqid,
        partition_id: pidOf.get('P0'),
        ack: null,
        state_ops: [{ type: 'upsert', key: 'x', value: i }],
        push_items: [{ queue: sink, partition: 'A', payload: { churn: i } }],
      });
      const reset = call('POST', '/streams/v1/queries', { name: other, source_queue: src, config_hash: 'h2', reset: true });
      const [w] = await Promise.all([write, reset]);
      if (w.body.success) for (const p of w.body.push_results) queuedByCycles.add(p.transaction_id);
      await call('POST', '/streams/v1/queries/drop', { name: other });
    }
  }

  await Promise.all([...SOURCES.map(streamWorker), ...[0, 1, 2].map(flusher), ...[0, 1, 2].map(pusher), churn()]);

  expect(statuses.filter((s) => s >= 500)).toEqual([]);
  expect(acked).toBeGreaterThan(0);
  const { rows } = await b.sql.query(
    `select count(*)::int as n, count(distinct coalesce(m.transaction_id, m.id::text))::int as distinct_tx
       from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1`,
    [sink],
  );
  expect(rows[0].n).toBe(queuedByCycles.size + plainPushed);
  expect(rows[0].distinct_tx).toBe(rows[0].n);
  const cursors = await b.sql.query(
    `select sum(c.cursor_offset)::int as s from queen.cursors c join queen.partitions p on p.id = c.partition_id
      where p.queue_name = $1 and c.consumer_group = $2`,
    [src, `streams.${name}`],
  );
  expect(cursors.rows[0].s).toBe(acked);
}, 180_000);
