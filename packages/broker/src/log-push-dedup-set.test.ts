import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// The allocator probes retained duplicates one transactionId at a time for a
// small run, and with two index scans for a run of more than eight (a stream
// cycle's outputs all carry one). Both must find the same duplicates: chosen
// transactionIds and the ids of messages pushed without one.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

const push = async (queue: string, items: Record<string, unknown>[]) => {
  const res = await b.http('POST', '/api/v1/push', { items: items.map((i) => ({ queue, partition: 'p', ...i })) });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body as { status: string; offset: string; message_id: string; transaction_id: string }[];
};

/** Two queues in the same state: chosen ids c0..c5 and three messages pushed without one. */
async function seeded() {
  const q = uniqueName('dedupset');
  const first = await push(q, [
    ...Array.from({ length: 6 }, (_, i) => ({ payload: i, transactionId: `c${i}` })),
    { payload: 'plain-1' }, { payload: 'plain-2' }, { payload: 'plain-3' },
  ]);
  return { q, ids: first.slice(6).map((r) => r.message_id) };
}

describe('push dedup, many transactionIds', () => {
  it('a run of 20 finds exactly what runs of at most 8 find', async () => {
    const one = await seeded();
    const many = await seeded();
    // Ids differ between the two queues: build each run from its own ids.
    const run = (ids: string[]) => [
      { payload: 'a', transactionId: 'c1' },              // retained chosen
      { payload: 'b', transactionId: ids[0] },            // a broker id, retained
      { payload: 'c', transactionId: ids[2]!.toUpperCase() }, // the same, upper case
      { payload: 'd', transactionId: 'new-1' },
      { payload: 'e', transactionId: 'new-1' },           // in-run duplicate
      { payload: 'f', transactionId: 'c5' },
      ...Array.from({ length: 12 }, (_, i) => ({ payload: `g${i}`, transactionId: `fresh-${i}` })),
      { payload: 'h', transactionId: '01234567-89ab-7def-8123-456789abcdef' }, // id-shaped, names nothing
      { payload: 'i' },                                   // no transactionId
    ];
    const small: Awaited<ReturnType<typeof push>> = [];
    const items = run(one.ids);
    for (let i = 0; i < items.length; i += 8) small.push(...(await push(one.q, items.slice(i, i + 8))));
    const big = await push(many.q, run(many.ids));
    const shape = (rs: typeof big) => rs.map((r) => [r.status, r.offset]);
    expect(shape(big)).toEqual(shape(small));
    expect(big.map((r) => r.status)).toEqual([
      'duplicate', 'duplicate', 'duplicate', 'queued', 'duplicate', 'duplicate',
      ...Array.from({ length: 12 }, () => 'queued'), 'queued', 'queued',
    ]);
    expect(big[1]!.message_id).toBe(many.ids[0]);
    expect(big[2]!.message_id).toBe(many.ids[2]);
  });

  it('a run of 10 that repeats a broker id and nine chosen transactionIds stores nothing new', async () => {
    const q = uniqueName('dedupset-repeat');
    const [plain] = await push(q, [{ payload: 'pushed without one' }]);
    const chosen = await push(q, Array.from({ length: 9 }, (_, i) => ({ payload: i, transactionId: `x-${i}` })));
    expect(chosen.map((r) => r.offset)).toEqual(['2', '3', '4', '5', '6', '7', '8', '9', '10']);
    const probe = await push(q, [{ payload: 'again', transactionId: plain!.message_id }, ...Array.from({ length: 9 }, (_, i) => ({ payload: i, transactionId: `x-${8 - i}` }))]);
    expect(probe[0]).toMatchObject({ status: 'duplicate', message_id: plain!.message_id, offset: '1' });
    expect(probe.slice(1).map((r) => [r.status, r.offset])).toEqual(Array.from({ length: 9 }, (_, i) => ['duplicate', String(10 - i)]));
    const { rows } = await b.sql.query('select count(*)::int as n from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1', [q]);
    expect(rows[0].n).toBe(10);
  });
});
