import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleep, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { RETENTION_SEGMENTS_PER_TRANSACTION } from './retention.js';

// Completed retention (PROTOCOL §3.9) over HTTP on a real
// PostgreSQL: it keeps what any subscribed group or stream query has not read,
// cursor row or not, and it works one partition (a few segments) per
// transaction.

let b: TestBroker;

beforeAll(async () => {
  b = await startTestBroker({ config: { segmentMaxMessages: 3 } });
});
afterAll(async () => {
  await b?.stop();
});

const push = (queue: string, n: number, partition = 'Default') =>
  b.http('POST', '/api/v1/push', { items: Array.from({ length: n }, (_, i) => ({ queue, partition, payload: { i } })) });
const pop = (queue: string, params: string, partition?: string) =>
  b.http('GET', `/api/v1/pop/queue/${queue}${partition ? `/partition/${partition}` : ''}?${params}`);
const ackAll = async (group: string, messages: any[]) => {
  const r = await b.http('POST', '/api/v1/ack/batch', {
    consumerGroup: group,
    acknowledgments: messages.map((m) => ({ transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId })),
  });
  expect(r.body.every((x: any) => x.success), JSON.stringify(r.body).slice(0, 300)).toBe(true);
};
const runRetention = async () => {
  const r = await b.http('POST', '/api/v1/system/maintenance/run', { tasks: ['retention'] });
  expect(r.status).toBe(200);
  return r.body.retention as { segmentsDropped: number; messagesDropped: number };
};
const storedIn = async (queue: string, partition: string) =>
  (
    await b.sql.query<{ n: number }>(
      'select count(*)::int as n from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1 and p.name = $2',
      [queue, partition],
    )
  ).rows[0]!.n;
const configure = (queue: string) => b.http('POST', '/api/v1/configure', { queue, options: { retentionEnabled: true, completedRetentionSeconds: 1 } });

describe('completed retention counts every reader', () => {
  it('B39 a subscribed group with no cursor row on a partition keeps that partition’s unread messages', async () => {
    const q = uniqueName('ret-sub');
    await configure(q);
    await push(q, 1, 'p1');
    // G subscribes (from the beginning) and gets a cursor on p1 only: p2 does not exist yet.
    const g = await pop(q, 'consumerGroup=G&batch=10');
    await ackAll('G', g.body.messages);
    await push(q, 6, 'p2');
    const h = await pop(q, 'consumerGroup=H&batch=10', 'p2');
    expect(h.body.messages).toHaveLength(6);
    await ackAll('H', h.body.messages);
    const noCursor = await b.sql.query(
      `select 1 from queen.cursors c join queen.partitions p on p.id = c.partition_id where p.queue_name = $1 and p.name = 'p2' and c.consumer_group = 'G'`,
      [q],
    );
    expect(noCursor.rowCount).toBe(0);
    await sleep(1100);
    await runRetention();
    expect(await storedIn(q, 'p2')).toBe(6);
    // Once G has read them they go (the closed segments: 6 messages, 3 a segment).
    const g2 = await pop(q, 'consumerGroup=G&batch=10', 'p2');
    expect(g2.body.messages).toHaveLength(6);
    await ackAll('G', g2.body.messages);
    await sleep(1100);
    const r = await runRetention();
    expect(r.messagesDropped).toBeGreaterThanOrEqual(3);
    expect(await storedIn(q, 'p2')).toBeLessThan(6);
  });

  it('B39 a registered stream query that has not read the source keeps its messages', async () => {
    const q = uniqueName('ret-stream');
    await configure(q);
    await push(q, 6);
    const reg = await b.http('POST', '/streams/v1/queries', { name: uniqueName('rq'), source_queue: q, config_hash: 'h' });
    expect(reg.status).toBe(200);
    const h = await pop(q, 'consumerGroup=H&batch=10');
    await ackAll('H', h.body.messages);
    await sleep(1100);
    await runRetention();
    expect(await storedIn(q, 'Default')).toBe(6);
    // The query's default group reads and acks: now they are completed for everyone.
    const name = (await b.http('GET', '/streams/v1/queries?limit=10000')).body.queries.find((x: any) => x.query_id === reg.body.query_id).name;
    const sg = await pop(q, `consumerGroup=${encodeURIComponent(`streams.${name}`)}&batch=10`);
    expect(sg.body.messages).toHaveLength(6);
    await ackAll(`streams.${name}`, sg.body.messages);
    await sleep(1100);
    expect((await runRetention()).messagesDropped).toBeGreaterThanOrEqual(3);
  });
});

describe('retention runs in short transactions', () => {
  it('one partition and at most RETENTION_SEGMENTS_PER_TRANSACTION segments per transaction', async () => {
    // Test-only probe: the transaction id of every segment retention deletes.
    await b.sql.query(`create table if not exists public.seg_deletes (txid bigint not null, partition_id uuid not null)`);
    await b.sql.query(`create or replace function public.note_seg_delete() returns trigger language plpgsql as $$
      begin insert into public.seg_deletes values (txid_current(), old.partition_id); return old; end $$`);
    await b.sql.query(`drop trigger if exists note_seg_delete on queen.log_segments`);
    await b.sql.query(`create trigger note_seg_delete after delete on queen.log_segments for each row execute function public.note_seg_delete()`);
    try {
      const q = uniqueName('ret-tx');
      await configure(q);
      // 3 partitions × 30 messages = 10 closed segments each.
      for (const p of ['a', 'b', 'c']) await push(q, 30, p);
      for (const p of ['a', 'b', 'c']) {
        const r = await pop(q, 'consumerGroup=G&batch=100', p);
        await ackAll('G', r.body.messages);
      }
      await sleep(1100);
      const r = await runRetention();
      expect(r.segmentsDropped).toBeGreaterThanOrEqual(27);
      const { rows } = await b.sql.query<{ txid: string; partitions: number; segments: number }>(
        'select txid::text, count(distinct partition_id)::int as partitions, count(*)::int as segments from public.seg_deletes group by txid',
      );
      expect(rows.length).toBeGreaterThanOrEqual(3 * Math.ceil(9 / RETENTION_SEGMENTS_PER_TRANSACTION));
      for (const row of rows) {
        expect(row.partitions).toBe(1);
        expect(row.segments).toBeLessThanOrEqual(RETENTION_SEGMENTS_PER_TRANSACTION);
      }
      // Every message of the dropped segments is gone, the open segments stay consumable.
      for (const p of ['a', 'b', 'c']) expect(await storedIn(q, p)).toBeLessThanOrEqual(3);
      await push(q, 1, 'a');
      const again = await pop(q, 'consumerGroup=G&batch=10', 'a');
      expect(again.body.messages).toHaveLength(1);
    } finally {
      await b.sql.query(`drop trigger if exists note_seg_delete on queen.log_segments`);
    }
  });
});
