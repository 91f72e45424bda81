import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { ackResultsOf } from '@queen-mq/protocol';
import { runAnswerOf, runOf } from './ack.js';
import { ACK_SQL, ackParams, type AckCall, type AckRow } from '../sql/queen.log_ack_v2.js';

// queen.log_ack_v2 answers the common request (every item completed, inside
// its lease) with one cursor move per partition (queen.log_ack_completed_v1),
// and falls through to the item-by-item walk (queen.log_ack_walk_v1) for
// everything else. Both must agree to the letter: here random requests run through
// each, from the same state, in transactions rolled back, and the answers
// (the compact one expanded as the broker does) and cursor rows are
// compared. The ack of one pop's run (the function's arrays) must agree with
// them too, whether its run check applies the request or falls through.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

/** Deterministic PRNG, so a failing case can be replayed. */
function rng(seed: number) {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

const cursorRows = (c: { query: typeof b.sql.query }, group: string) =>
  c.query(`select partition_id, cursor_offset, lease_id, lease_last_offset, lease_expires_at is null as no_expiry
             from queen.cursors where consumer_group = $1 order by partition_id`, [group]);

/**
 * `items` acked by queen.log_ack_v2 as jsonb (by queen.log_ack_walk_v1
 * alone with `walk`), rolled back: the answer expanded, the cursors after it, and
 * whether the walk answered (per-item results, not the compact form).
 */
async function run(walk: boolean, group: string, items: { transactionId: string; partitionId: string }[]) {
  const c = await b.sql.connect();
  try {
    await c.query('begin');
    const r = walk
      ? await c.query('select queen.log_ack_walk_v1($1, $2::jsonb) as r', [group, JSON.stringify(items)])
      : await c.query('select r_answer as r from queen.log_ack_v2($1, $2::jsonb, null, null, null, null)', [group, JSON.stringify(items)]);
    const cursors = await cursorRows(c, group);
    await c.query('rollback');
    return { answer: ackResultsOf(items, r.rows[0].r), cursors: cursors.rows, walked: Array.isArray(r.rows[0].r) };
  } finally {
    c.release();
  }
}

/** The run ack of `items` as the broker sends it, rolled back: its answer expanded, the cursors after it, whether the run check applied it; null when the broker would not send it as a run. */
async function runAck(group: string, items: any[]) {
  const run = runOf(items);
  if (!run) return null;
  const c = await b.sql.connect();
  try {
    await c.query('begin');
    const call: AckCall = { run };
    const r = await c.query<AckRow>(ACK_SQL.skip.text, ackParams(group, call));
    const cursors = await cursorRows(c, group);
    await c.query('rollback');
    const row = r.rows[0]!;
    return { applied: row.answer === null, answer: ackResultsOf(items, row.answer ?? runAnswerOf(run, row)), cursors: cursors.rows };
  } finally {
    c.release();
  }
}

describe('ack: one cursor move per partition', () => {
  it('answers and moves cursors exactly like the item-by-item walk, for random completed requests', async () => {
    const q = uniqueName('ackset');
    // Two partitions of 30 messages; some with chosen transactionIds.
    for (const p of ['a', 'b']) {
      await b.http('POST', '/api/v1/push', { items: Array.from({ length: 30 }, (_, i) => ({ queue: q, partition: p, payload: i, ...(i % 7 === 3 ? { transactionId: `${p}-t${i}` } : {}) })) });
    }
    // Lease 12 messages of each partition, then ack the first 3 of a: the cursor is inside the lease.
    const leased: any[] = [];
    for (let i = 0; i < 2; i++) leased.push(...(await b.http('GET', `/api/v1/pop/queue/${q}?batch=12`)).body.messages);
    expect(leased).toHaveLength(24);
    const a = leased.filter((m) => m.partition === 'a');
    for (const m of a.slice(0, 3)) expect((await b.http('POST', '/api/v1/ack', { transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId })).body[0].success).toBe(true);
    const all = (await b.sql.query(
      `select p.name, m.partition_id, m.msg_offset::int as o, coalesce(m.transaction_id, m.id::text) as txid
         from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1 order by 1, 3`, [q])).rows;
    const leaseOf = Object.fromEntries(leased.map((m) => [m.partitionId, m.leaseId]));

    const random = rng(20261203);
    let fast = 0;
    let walked = 0;
    let fastByOffset = 0;
    let onePops = 0;
    let runApplied = 0;
    let runDeclined = 0;
    for (let round = 0; round < 90; round++) {
      const n = 1 + Math.floor(random() * 14);
      // Half the requests are what consumers send (distinct messages inside
      // the live leases, past the cursor); half are anything at all.
      const wellFormed = random() < 0.5;
      // A third of the well-formed ones are what one pop's consumer sends:
      // a run of one partition's leased messages, in order, with offsets
      // (checked by one range scan, by position).
      const onePop = wellFormed && random() < 0.33;
      const pool = wellFormed ? all.filter((m) => (m.name === 'a' ? m.o > 3 : true) && m.o <= 12) : all;
      const run1 = pool.filter((m) => m.name === (random() < 0.5 ? 'a' : 'b'));
      const from = Math.floor(random() * run1.length);
      const picked = onePop
        ? run1.slice(from, from + n)
        : wellFormed ? [...pool].sort(() => random() - 0.5).slice(0, n) : Array.from({ length: n }, () => pool[Math.floor(random() * pool.length)]!);
      // Half the requests name each message's offset, as our client does;
      // now and then one names another message's offset, or none that exists.
      const withOffsets = onePop || random() < 0.5;
      // Now and then two items of a run trade offsets: each names a message of the range that is not its own.
      const swap = onePop && picked.length > 1 && random() < 0.3;
      if (onePop) onePops++;
      const items = picked.map((m, idx) => {
        const roll = wellFormed ? 0.5 : random();
        const slip = random();
        const own = swap && idx < 2 ? picked[1 - idx]!.o : m.o;
        return {
          ...(withOffsets ? { offset: String(slip < 0.06 ? all[Math.floor(random() * all.length)]!.o : slip < 0.08 ? 999 : own) } : {}),
          idx,
          transactionId: roll < 0.03 ? 'no-such-message' : m.txid,
          partitionId: m.partition_id,
          status: roll > 0.97 ? 'failed' : random() < 0.5 ? 'completed' : 'success',
          // Mostly the right lease; sometimes none, sometimes a stale one.
          ...(random() < 0.8 ? { leaseId: wellFormed || random() < 0.9 ? leaseOf[m.partition_id] : '00000000-0000-4000-8000-000000000000' } : {}),
        };
      });
      // And now and then a run names one of its messages twice.
      if (onePop && random() < 0.2) items.push({ ...items[0]!, idx: items.length });
      const set = await run(false, '__QUEUE_MODE__', items);
      const walk = await run(true, '__QUEUE_MODE__', items);
      expect(walk.walked).toBe(true);
      expect(set.answer, JSON.stringify(items)).toEqual(walk.answer);
      expect(set.cursors, JSON.stringify(items)).toEqual(walk.cursors);
      const ran = await runAck('__QUEUE_MODE__', items);
      if (ran) {
        if (ran.applied) runApplied++;
        else runDeclined++;
        expect(ran.answer, JSON.stringify(items)).toEqual(walk.answer);
        expect(ran.cursors, JSON.stringify(items)).toEqual(walk.cursors);
      }
      if (set.walked) walked++;
      else {
        fast++;
        if (withOffsets) fastByOffset++;
      }
    }
    // Both branches were exercised: the comparison would prove nothing otherwise.
    expect(fast).toBeGreaterThan(5);
    expect(fastByOffset).toBeGreaterThan(3);
    expect(onePops).toBeGreaterThan(8);
    expect(walked).toBeGreaterThan(5);
    expect(runApplied).toBeGreaterThan(3);
    expect(runDeclined).toBeGreaterThan(3);
  });

  it('an item offset that is not up to 18 digits is a 400 that changes nothing; one naming another message is ignored', async () => {
    const q = uniqueName('ackset-offset');
    await b.http('POST', '/api/v1/push', { items: Array.from({ length: 3 }, (_, i) => ({ queue: q, partition: 'p', payload: i })) });
    const msgs = (await b.http('GET', `/api/v1/pop/queue/${q}?batch=3`)).body.messages as any[];
    const item = (m: any, offset: string) => ({ transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, offset });
    for (const bad of ['1e3', '-1', '', '9999999999999999999']) {
      const r = await b.http('POST', '/api/v1/ack/batch', { acknowledgments: [item(msgs[0], bad)] });
      expect(r.status, bad).toBe(400);
      expect(r.body.code).toBe('VALIDATION_FAILED');
    }
    // The first message acked under the third's offset: the transactionId decides.
    const r = await b.http('POST', '/api/v1/ack/batch', { acknowledgments: [item(msgs[0], msgs[2].offset)] });
    expect(r.body).toMatchObject([{ success: true, offset: msgs[0].offset, leaseReleased: false }]);
    const cur = await b.sql.query(`select cursor_offset::text as c from queen.cursors c join queen.partitions p on p.id = c.partition_id where p.queue_name = $1`, [q]);
    expect(cur.rows).toEqual([{ c: msgs[0].offset }]);
  });

  it('a sparse run (two items over ten offsets) whose second offset names another message is acked by its transactionId', async () => {
    const q = uniqueName('ackset-sparse');
    await b.http('POST', '/api/v1/push', { items: Array.from({ length: 10 }, (_, i) => ({ queue: q, partition: 'p', payload: i })) });
    const msgs = (await b.http('GET', `/api/v1/pop/queue/${q}?batch=10`)).body.messages as any[];
    const item = (m: any, offset: string) => ({ transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, offset });
    // The second message under the tenth's offset: the run check cannot vouch
    // for a sparse range, so each item's message is found by its id.
    const r = await b.http('POST', '/api/v1/ack/batch', { acknowledgments: [item(msgs[0], msgs[0].offset), item(msgs[1], msgs[9].offset)] });
    expect(r.body.map((x: any) => [x.success, x.offset])).toEqual([[true, '1'], [true, '2']]);
    const cur = await b.sql.query(`select cursor_offset::text as c from queen.cursors c join queen.partitions p on p.id = c.partition_id where p.queue_name = $1`, [q]);
    expect(cur.rows).toEqual([{ c: '2' }]);
  });

  it('a whole leased batch acked at once releases the lease on its last message only', async () => {
    const q = uniqueName('ackset-batch');
    await b.http('POST', '/api/v1/push', { items: Array.from({ length: 100 }, (_, i) => ({ queue: q, partition: 'p', payload: i })) });
    const msgs = (await b.http('GET', `/api/v1/pop/queue/${q}?batch=100`)).body.messages as any[];
    const r = await b.http('POST', '/api/v1/ack/batch', { acknowledgments: msgs.map((m) => ({ transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status: 'completed' })) });
    expect(r.status).toBe(200);
    expect(r.body.map((x: any) => x.success).every(Boolean)).toBe(true);
    expect(r.body.filter((x: any) => x.leaseReleased).map((x: any) => x.offset)).toEqual(['100']);
    const cur = await b.sql.query(`select cursor_offset::int as c, lease_id from queen.cursors c join queen.partitions p on p.id = c.partition_id where p.queue_name = $1`, [q]);
    expect(cur.rows).toEqual([{ c: 100, lease_id: null }]);
  });
});
