import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// The allocator looks retained duplicates up one transactionId at a time
// (queen.log_retained_duplicates_v1, migration 013), for a small run and for
// a run of many (a stream cycle's outputs all carry one; before 013 those
// took another path). Both must find the same duplicates: chosen
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

describe('push dedup, insert first (015)', () => {
  it('a run that repeats a retained transactionId or one of its own is answered as the lookups answer it, gapless', async () => {
    const q = uniqueName('dedupset-first');
    await push(q, Array.from({ length: 3 }, (_, i) => ({ payload: i, transactionId: `kept-${i}` })));
    const run = await push(q, [
      { payload: 'a', transactionId: 'fresh-a' },
      { payload: 'b', transactionId: 'kept-1' },
      { payload: 'c', transactionId: 'fresh-b' },
      { payload: 'd', transactionId: 'fresh-a' },
    ]);
    expect(run.map((r) => [r.status, r.offset])).toEqual([['queued', '4'], ['duplicate', '2'], ['queued', '5'], ['duplicate', '4']]);
    const next = await push(q, [{ payload: 'e', transactionId: 'fresh-c' }]);
    expect(next[0]).toMatchObject({ status: 'queued', offset: '6' });
    const { rows } = await b.sql.query('select count(*)::int as n from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1', [q]);
    expect(rows[0].n).toBe(6);
  });

  it('a transaction appending to 40 partitions opens at most 32 subtransactions, so its ids stay in shared memory', async () => {
    const q = uniqueName('dedupset-subxacts');
    await b.http('POST', '/api/v1/push', { items: Array.from({ length: 40 }, (_, i) => ({ queue: q, partition: `p${i}`, payload: 'seed' })) });
    const { rows: parts } = await b.sql.query('select id from queen.partitions where queue_name = $1 order by name', [q]);
    expect(parts).toHaveLength(40);
    const c = await b.sql.connect();
    try {
      await c.query('begin');
      for (const [i, part] of parts.entries()) {
        const { rows } = await c.query('select status from queen.log_push_many_v1($1::jsonb, null)', [JSON.stringify([{ partition_id: part.id, payload: i, transaction_id: `t-${i}` }])]);
        expect(rows).toEqual([{ status: 'queued' }]);
      }
      const { rows: [mine] } = await c.query(`select s.subxact_count::int as n, s.subxact_overflowed as overflowed
          from pg_stat_get_backend_idset() as b(id), lateral pg_stat_get_backend_subxact(b.id) s
         where pg_stat_get_backend_pid(b.id) = pg_backend_pid()`);
      await c.query('rollback');
      expect(mine).toEqual({ n: 32, overflowed: false });
    } finally {
      c.release();
    }
  });
});

describe('push dedup reads what it looks up, not the partition', () => {
  it('500 new transactionIds pushed to a partition that grew after the last ANALYZE fetch none of its retained messages', async () => {
    // Statistics taken while the sink partition held ten messages among
    // 4,000 others, then the sink grows to 5,010: planned from those
    // statistics, one scan for all the ids read the whole partition (006).
    const sink = uniqueName('dedup-sink');
    for (let p = 0; p < 8; p++) await push(uniqueName('dedup-src'), Array.from({ length: 500 }, (_, i) => ({ payload: i })));
    await push(sink, Array.from({ length: 10 }, (_, i) => ({ payload: i, transactionId: `seed-${i}` })));
    await b.sql.query('analyze queen.messages');
    for (let k = 0; k < 10; k++) await push(sink, Array.from({ length: 500 }, (_, i) => ({ payload: i, transactionId: `grow-${k}-${i}` })));
    const { rows: [part] } = await b.sql.query('select id from queen.partitions where queue_name = $1', [sink]);
    // One id-shaped transactionId (it names nothing) keeps the run on the lookup path (015 inserts other runs first).
    const items = Array.from({ length: 500 }, (_, i) => ({ partition_id: part.id, payload: i, transaction_id: i === 0 ? '01234567-89ab-7def-8123-456789abcdef' : `new-${i}` }));
    const c = await b.sql.connect();
    const fetched = `select idx_tup_fetch::int as n from pg_stat_xact_user_tables where relid = 'queen.messages'::regclass`;
    try {
      await c.query('begin');
      const before = (await c.query(fetched)).rows[0].n;
      const { rows } = await c.query('select status from queen.log_push_many_v1($1::jsonb, null)', [JSON.stringify(items)]);
      const after = (await c.query(fetched)).rows[0].n;
      await c.query('rollback');
      expect(rows.every((r) => r.status === 'queued')).toBe(true);
      expect(after - before).toBeLessThan(100);
    } finally {
      c.release();
    }
  });
});
