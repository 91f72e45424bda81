import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// queen_streams.apply_state_ops_v1 writes a cycle's state ops. Its plans are
// cached before the partition holds any rows, so a statement joining the ops
// to the rows would be planned as a loop over every row of the partition per
// op: a join's cycles (a row per record) then slowed down with the state they
// held. Read through auto_explain, no statement of a cycle of 1,000 ops on a
// partition of 6,000 rows may look at more than a few rows per op.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

it('a cycle of 1,000 ops on a partition of 6,000 rows: no statement looks at the partition once per op', async () => {
  const reg = await b.http('POST', '/streams/v1/queries', { name: uniqueName('plans'), source_queue: 'src', config_hash: 'h' });
  const qid = reg.body.query_id as string;
  const pid = '00000000-0000-4000-8000-0000000000aa';
  const client = await b.sql.connect();
  try {
    const versions = new Map<string, number>();
    const apply = async (ops: unknown[]) => {
      const { rows } = await client.query('select queen_streams.apply_state_ops_v1($1, $2, $3::jsonb) as r', [qid, pid, JSON.stringify(ops)]);
      for (const r of rows[0].r.results) versions.set(r.key, r.version);
      return rows[0].r;
    };
    // Six cycles of 1,000 new keys each: the plans are cached on the first, while the partition is empty.
    for (let round = 0; round < 6; round++) {
      await apply(Array.from({ length: 1000 }, (_, i) => ({ type: 'upsert', key: `k${round}-${i}`, value: { i }, expected_version: 0 })));
    }
    const notices: string[] = [];
    client.on('notice', (m) => notices.push(m.message ?? ''));
    await client.query(`load 'auto_explain'`);
    await client.query('set auto_explain.log_min_duration = 0; set auto_explain.log_analyze = on; set auto_explain.log_nested_statements = on; set client_min_messages = log');
    // 400 new keys, 400 updates and 200 deletes, each against the version it read.
    const ops = [
      ...Array.from({ length: 400 }, (_, i) => ({ type: 'upsert', key: `new-${i}`, value: { i }, expected_version: 0 })),
      ...Array.from({ length: 400 }, (_, i) => ({ type: 'upsert', key: `k5-${i}`, value: { i, again: true }, expected_version: versions.get(`k5-${i}`) })),
      ...Array.from({ length: 200 }, (_, i) => ({ type: 'delete', key: `k4-${i}`, expected_version: versions.get(`k4-${i}`) })),
    ];
    const answer = await apply(ops);
    await client.query('set client_min_messages = notice; set auto_explain.log_min_duration = -1');
    expect(answer.applied).toBe(1000);
    const plans = notices.filter((n) => n.includes('plan:') && !n.includes('apply_state_ops_v1($1'));
    expect(plans.length).toBeGreaterThan(3);
    // Rows an operator looked at and let go, per plan: a loop over the partition per op shows millions.
    const removed = plans.map((p) => [...p.matchAll(/Rows Removed by (?:Join )?Filter: (\d+)/g)].reduce((n, m) => n + Number(m[1]), 0));
    expect(Math.max(...removed), plans.join("\n\n")).toBeLessThan(5_000);
    const { rows } = await client.query(`select count(*)::int as n from queen_streams.state where query_id = $1 and partition_id = $2`, [qid, pid]);
    expect(rows[0].n).toBe(6000 + 400 - 200);

    // The rows an op names are locked until the cycle commits: another session cannot take one.
    await client.query('begin');
    await apply([{ type: 'upsert', key: 'k0-7', value: 1, expected_version: versions.get('k0-7') }]);
    const other = b.sql.query(`select 1 from queen_streams.state where query_id = $1 and partition_id = $2 and key = 'k0-7' for update nowait`, [qid, pid]);
    await expect(other).rejects.toMatchObject({ code: '55P03' });
    await client.query('rollback');
  } finally {
    client.release(true);
  }
}, 60_000);
