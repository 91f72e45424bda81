import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// Exactly-once under contention (SEED "Why it is exactly-once", PROTOCOL §7.6):
// an idle flush (ack:null, delete with expected_version + emit), a second
// copy of that flush (another runner, or an HTTP retry) and a cycle (upsert
// with expected_version) are fired at the same row concurrently over HTTP.
// They serialise on the shard lock and compare versions, so per row version
// at most one of them commits and a flush emits only if it won.

const RACES = 1000;
const LANES = 4; // rows raced in parallel on the same (query, partition) shard

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

it(`flush vs cycle: ${RACES} concurrent races on one shard, zero double emits`, async () => {
  const reg = await b.http('POST', '/streams/v1/queries', { name: uniqueName('race'), source_queue: 'src', config_hash: 'h' });
  const qid = reg.body.query_id as string;
  const pid = '00000000-0000-4000-8000-0000000000ff';
  const sink = uniqueName('sink');
  const statuses = new Map<number, number>();
  const flushWins: string[] = []; // `${key}@${version}` of every flush that committed
  let cycleWins = 0;
  let bothLost = 0;

  const post = async (body: unknown) => {
    const res = await b.http('POST', '/streams/v1/cycle', body);
    statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
    return res.body;
  };

  async function lane(lane: number, races: number) {
    const key = `win␟${lane}`;
    let version = 0; // 0 = the row is absent
    for (let i = 0; i < races; i++) {
      if (version === 0) {
        const created = await post({ query_id: qid, partition_id: pid, ack: null, state_ops: [{ type: 'upsert', key, value: { windowEnd: i }, expected_version: 0 }] });
        expect(created.success).toBe(true);
        version = created.state_results[0].version;
      }
      const flush = {
        query_id: qid,
        partition_id: pid,
        ack: null,
        state_ops: [{ type: 'delete', key, expected_version: version }],
        // No transactionId: a second commit of this emit would be a second message, not a dedup.
        push_items: [{ queue: sink, payload: { lane, race: i, version } }],
      };
      const upd = { query_id: qid, partition_id: pid, state_ops: [{ type: 'upsert', key, value: { windowEnd: i, acc: i }, expected_version: version }] };
      const [f1, c, f2] = await Promise.all([post(flush), post(upd), post(flush)]);
      for (const r of [f1, c, f2]) if (!r.success) expect(r.code).toBe('VERSION_CONFLICT');
      const winners = [f1, c, f2].filter((r) => r.success);
      expect(winners.length).toBeLessThanOrEqual(1);
      if (winners.length === 0) bothLost++;
      for (const f of [f1, f2]) {
        if (f.success) {
          expect(f.push_results).toHaveLength(1);
          flushWins.push(`${key}@${version}`);
          version = 0;
        } else {
          expect(f.push_results).toEqual([]);
        }
      }
      if (c.success) {
        cycleWins++;
        version = c.state_results[0].version;
      }
    }
  }

  await Promise.all(Array.from({ length: LANES }, (_, l) => lane(l, RACES / LANES)));

  expect([...statuses.keys()]).toEqual([200]);
  // Exactly one of the three wins every race (the row version is the one all three read).
  expect(bothLost).toBe(0);
  expect(flushWins.length + cycleWins).toBe(RACES);
  // At most one flush per row version; the sink holds exactly the successful flushes.
  expect(new Set(flushWins).size).toBe(flushWins.length);
  const { rows } = await b.sql.query(
    `select count(*)::int as n, count(distinct (m.payload->>'lane', m.payload->>'version'))::int as distinct_versions
       from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1`,
    [sink],
  );
  expect(rows[0].n).toBe(flushWins.length);
  expect(rows[0].distinct_versions).toBe(flushWins.length);
  // Both outcomes actually happened, so the race was a race.
  expect(flushWins.length).toBeGreaterThan(0);
  expect(cycleWins).toBeGreaterThan(0);
  console.log(`flush/cycle races: ${RACES}, flush won ${flushWins.length}, cycle won ${cycleWins}, sink messages ${rows[0].n}`);
}, 300_000);
