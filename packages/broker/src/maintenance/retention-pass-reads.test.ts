import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleep, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// What a maintenance pass (PROTOCOL §3.9) reads follows what it may act on,
// not how many partitions exist. The statement that finds a
// retention pass's partitions (queen.log_retention_candidates_v1) probed the
// oldest segment of every partition of every queue with retention (at
// 100,000 partitions kept a day, nothing due, all of them), and the partition cleanup read
// every partition for the empty ones. Both now start from indexes on
// partitions.retained_since (migration 030), which a push writes only when
// its partition was empty. Counted in rows and index entries read
// (pg_stat_xact_user_tables), which do not drift with the machine's load.

let b: TestBroker;
beforeAll(async () => {
  // Segments of the broker's pushes close after a second (the last test splits one partition's messages).
  b = await startTestBroker({ config: { segmentMaxAgeS: 1 } });
});
afterAll(async () => b?.stop());

const configure = (queue: string, options: Record<string, unknown>) => b.http('POST', '/api/v1/configure', { queue, options });

/** Partitions `from`..`to`-1 of `queue`, one message each, pushed in SQL (thousands of HTTP pushes would take a minute). */
async function seed(queue: string, from: number, to: number): Promise<void> {
  for (let at = from; at < to; at += 2_500) {
    const targets = Array.from({ length: Math.min(2_500, to - at) }, (_, i) => ({ queue, partition: `p${at + i}` }));
    const ids = (await b.sql.query<{ partition_id: string }>('select partition_id from queen.ensure_partitions_v1($1::jsonb)', [JSON.stringify(targets)])).rows.map((r) => r.partition_id);
    await b.sql.query('select count(*) from queen.log_push_many_v1($1::jsonb, null)', [JSON.stringify(ids.map((id) => ({ partition_id: id, payload: 1 })))]);
  }
}

const PER_PARTITION = ['partitions', 'log_segments'];

/**
 * Counters of this session's transaction per table (pg_stat_xact_user_tables,
 * with the index entries its indexes returned). They also hold what earlier
 * transactions of the session did until the session reports its statistics:
 * take the difference around a statement.
 */
async function counters(c: pg.PoolClient): Promise<Record<string, { read: number; upd: number; hot: number }>> {
  const { rows } = await c.query<{ relname: string; read: number; upd: number; hot: number }>(
    `select t.relname, (t.seq_tup_read + coalesce(t.idx_tup_fetch, 0)
                        + (select coalesce(sum(pg_stat_get_xact_tuples_returned(i.indexrelid)), 0) from pg_index i where i.indrelid = t.relid))::int as read,
            t.n_tup_upd::int as upd, t.n_tup_hot_upd::int as hot
       from pg_stat_xact_user_tables t where t.schemaname = 'queen' and t.relname = any($1)`,
    [PER_PARTITION],
  );
  return Object.fromEntries(rows.map(({ relname, ...n }) => [relname, n]));
}

/**
 * What `statement` did to the partition and segment tables, per table: rows
 * and index entries it read (`read`: rows fetched by a scan of the table or
 * through an index, plus index entries returned), rows it updated (`upd`)
 * and of those HOT (`hot`); in a transaction of its own, rolled back unless
 * `keep`; and its rows.
 */
async function measured(statement: string, params: unknown[] = [], keep = false) {
  const c = await b.sql.connect();
  try {
    await c.query('begin');
    const before = await counters(c);
    const { rows } = await c.query(statement, params);
    const after = await counters(c);
    await c.query(keep ? 'commit' : 'rollback');
    c.release();
    const delta = (key: 'read' | 'upd' | 'hot') => Object.fromEntries(PER_PARTITION.map((t) => [t, (after[t]?.[key] ?? 0) - (before[t]?.[key] ?? 0)]));
    return { read: delta('read'), upd: delta('upd'), hot: delta('hot'), rows };
  } catch (err) {
    c.release(err as Error);
    throw err;
  }
}
const total = (read: Record<string, number>) => Object.values(read).reduce((a, n) => a + n, 0);

/** Makes the messages of `queue`'s partitions `names` look `seconds` older, as if pushed then. */
async function age(queue: string, names: string[], seconds: number): Promise<void> {
  const of = 'partition_id in (select id from queen.partitions where queue_name = $1 and name = any($2))';
  const by = `make_interval(secs => ${seconds})`;
  await b.sql.query(`update queen.messages set created_at = created_at - ${by} where ${of}`, [queue, names]);
  await b.sql.query(`update queen.log_segments set first_created_at = first_created_at - ${by}, last_created_at = last_created_at - ${by} where ${of}`, [queue, names]);
  await b.sql.query(`update queen.partitions set retained_since = retained_since - ${by}, last_created_at = last_created_at - ${by} where queue_name = $1 and name = any($2)`, [queue, names]);
}

const CANDIDATES = 'select id from queen.log_retention_candidates_v1() id';
const PUSH = 'select count(*) from queen.log_push_many_v1($1::jsonb, null)';

describe('retention and cleanup passes read what they may act on', () => {
  it('a push to a partition that holds messages updates its row and its open segment HOT (no index entry written)', async () => {
    // First in the file: a HOT update also needs room on the row's page, which the tables have while small.
    const queue = uniqueName('hot');
    const pid = (await b.sql.query<{ partition_id: string }>('select partition_id from queen.ensure_partitions_v1($1::jsonb)', [JSON.stringify([{ queue, partition: 'p' }])])).rows[0]!.partition_id;
    const one = [JSON.stringify([{ partition_id: pid, payload: 1 }])];
    // The first push sets retained_since (the partition was empty): that one writes index entries.
    expect((await measured(PUSH, one, true)).upd.partitions).toBe(1);
    for (let i = 0; i < 5; i++) {
      const next = await measured(PUSH, one, true);
      expect({ upd: next.upd, hot: next.hot }).toEqual({ upd: { partitions: 1, log_segments: 1 }, hot: { partitions: 1, log_segments: 1 } });
    }
  });

  it('with nothing due but 3 partitions, the candidates statement reads as much at 10,000 partitions kept a day as at 1,000', async () => {
    // `kept` holds its messages a day; `old` as well, but 3 of its
    // partitions hold messages of two days ago: those are due.
    const kept = uniqueName('kept-day');
    const old = uniqueName('old-day');
    for (const queue of [kept, old]) await configure(queue, { retentionEnabled: true, retentionSeconds: 86400 });
    await seed(old, 0, 10);
    await age(old, ['p0', 'p1', 'p2'], 2 * 86400);
    await seed(kept, 0, 1_000);
    await b.sql.query('analyze queen.partitions, queen.log_segments');
    const small = await measured(CANDIDATES);
    await seed(kept, 1_000, 10_000);
    const big = await measured(CANDIDATES);
    console.log(`candidates, 3 due: ${JSON.stringify(small.read)} rows read beside 1,000 partitions kept a day, ${JSON.stringify(big.read)} beside 10,000`);
    const due = (await b.sql.query<{ id: string }>('select id from queen.partitions where queue_name = $1 and name = any($2) order by id', [old, ['p0', 'p1', 'p2']])).rows.map((r) => r.id);
    expect(big.rows.map((r) => r.id)).toEqual(due);
    // Per due partition: its index entry and row, its oldest segment's entry and row.
    expect(total(big.read)).toBeLessThanOrEqual(4 * due.length + 4);
    expect(total(big.read)).toBeLessThanOrEqual(total(small.read));

    // Nor more beside a queue of a 1 s window: each queue's partitions are
    // read from its own window on (a window taken from all queues at once
    // read the 10,000 partitions kept a day, all older than a second).
    const short = uniqueName('short');
    await configure(short, { retentionEnabled: true, retentionSeconds: 1 });
    await sleep(1100);
    const mixed = await measured(CANDIDATES);
    console.log(`candidates beside a queue of a 1 s window: ${JSON.stringify(mixed.read)} rows read`);
    expect(mixed.rows.map((r) => r.id)).toEqual(due);
    expect(total(mixed.read)).toBeLessThanOrEqual(4 * due.length + 4);
    await configure(short, { retentionEnabled: false });
  }, 120000);

  it('the partition cleanup reads the empty partitions, not the 10,000 that hold messages', async () => {
    // 5 empty partitions, inactive for a minute, beside those of the test above.
    const empty = uniqueName('empty');
    await b.sql.query('select queen.ensure_partitions_v1($1::jsonb)', [JSON.stringify(Array.from({ length: 5 }, (_, p) => ({ queue: empty, partition: `p${p}` })))]);
    await b.sql.query("update queen.partitions set last_activity = now() - interval '1 minute' where queue_name = $1", [empty]);
    const held = Number((await b.sql.query('select count(*) as n from queen.partitions where head_offset >= first_offset')).rows[0].n);
    const emptyNow = Number((await b.sql.query('select count(*) as n from queen.partitions where head_offset < first_offset')).rows[0].n);
    expect(held).toBeGreaterThanOrEqual(10_000);
    // A partition's first push leaves the index entry of its row as it was
    // (empty) behind, until vacuum: autovacuum after a burst of new
    // partitions (a pass's index scan marks most of them dead before).
    await b.sql.query('vacuum queen.partitions');
    const gone = await measured('select queen.log_partition_cleanup_v1(30) as r');
    console.log(`partition cleanup, ${emptyNow} empty beside ${held} holding messages: ${JSON.stringify(gone.read)} rows read`);
    expect(gone.rows[0].r.partitions.filter(([queue]: [string, string]) => queue === empty)).toHaveLength(5);
    // Per empty partition: its index entry and row, then the lock's re-check
    // and the delete by id (an entry and a row each).
    expect(total(gone.read)).toBeLessThanOrEqual(10 * emptyNow + 10);
  }, 60000);

  it('retained_since is the first createdAt of the oldest segment left, null exactly when the partition is empty', async () => {
    // After the tests above, and a pass that drops one segment of two.
    const q = uniqueName('split');
    await configure(q, { retentionEnabled: true, retentionSeconds: 1 });
    const push = () => b.http('POST', '/api/v1/push', { items: [{ queue: q, partition: 'p0', payload: 1 }] });
    await push();
    await sleep(2100);
    await push(); // a segment of its own (the first is over a second old): not due
    await b.http('POST', '/api/v1/system/maintenance/run', { tasks: ['retention'] });
    const { rows } = await b.sql.query<{ queue_name: string; name: string; retained_since: Date | null; oldest: Date | null; empty: boolean }>(
      `select p.queue_name, p.name, p.retained_since, p.head_offset < p.first_offset as empty,
              (select s.first_created_at from queen.log_segments s where s.partition_id = p.id order by s.first_offset limit 1) as oldest
         from queen.partitions p`,
    );
    const split = rows.find((r) => r.queue_name === q && r.name === 'p0')!;
    expect(split).toMatchObject({ empty: false });
    expect(rows.filter((r) => r.empty).length).toBeGreaterThan(0);
    const wrong = rows.filter((r) => r.retained_since?.getTime() !== r.oldest?.getTime() || (r.retained_since === null) !== r.empty);
    expect(wrong).toEqual([]);
  }, 30000);
});
