import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// A partition id this broker cached may name a partition another broker has
// deleted since (queue delete, cleanup): the allocator raises P0002, and
// push, transaction and cycle sink push all go through the one retry of
// PartitionDirectory.retrying (forget the cache, ensure again, once).

let a: TestBroker;
let b: TestBroker;
beforeAll(async () => {
  a = await startTestBroker();
  b = await startTestBroker({ databaseUrl: a.databaseUrl });
});
afterAll(async () => {
  await b?.stop();
  await a?.stop();
});

/** Broker a caches q/p's partition id; broker b deletes the queue under it. */
async function deletedUnderA(q: string): Promise<void> {
  expect((await a.http('POST', '/api/v1/push', { items: [{ queue: q, partition: 'p', payload: 0 }] })).status).toBe(201);
  expect((await b.http('DELETE', `/api/v1/resources/queues/${q}`)).body).toMatchObject({ deleted: true, existed: true });
}

async function stored(q: string) {
  const { rows } = await a.sql.query(
    `select m.msg_offset::int as o, m.payload from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1 and p.name = 'p' order by 1`,
    [q],
  );
  return rows;
}

describe('one retry when a cached partition was deleted by another broker', () => {
  it('push re-creates the queue and appends', async () => {
    const q = uniqueName('retry-push');
    await deletedUnderA(q);
    const r = await a.http('POST', '/api/v1/push', { items: [{ queue: q, partition: 'p', payload: 1 }] });
    expect(r.status).toBe(201);
    expect(r.body[0]).toMatchObject({ status: 'queued', offset: '1' });
    expect(await stored(q)).toEqual([{ o: 1, payload: 1 }]);
  });

  it('a transaction push re-creates the queue and appends', async () => {
    const q = uniqueName('retry-txn');
    await deletedUnderA(q);
    const r = await a.http('POST', '/api/v1/transaction', { operations: [{ type: 'push', items: [{ queue: q, partition: 'p', payload: 2 }] }] });
    expect(r.body).toMatchObject({ success: true, results: [{ type: 'push', status: 'queued', offset: '1', queueName: q }] });
    expect(await stored(q)).toEqual([{ o: 1, payload: 2 }]);
  });

  it('a cycle sink push re-creates the queue and appends', async () => {
    const q = uniqueName('retry-cycle');
    await deletedUnderA(q);
    const query = await a.http('POST', '/streams/v1/queries', { name: uniqueName('retry'), source_queue: 'src', config_hash: 'h' });
    const r = await a.http('POST', '/streams/v1/cycle', {
      query_id: query.body.query_id,
      partition_id: '00000000-0000-4000-8000-0000000000b1',
      ack: null,
      push_items: [{ queue: q, partition: 'p', payload: 3 }],
    });
    expect(r.body).toMatchObject({ success: true, push_results: [{ status: 'queued', offset: '1', queueName: q }] });
    expect(await stored(q)).toEqual([{ o: 1, payload: 3 }]);
  });
});
