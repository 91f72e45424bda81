import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// One ack path (migration 008): the ack's one-move path, its item-by-item
// walk (both in queen.log_ack_v2) and a stream cycle's source ack all lock, fence and move
// through queen.log_ack_lock_v1, queen.log_ack_fence_v1 and
// queen.log_ack_move_v1. Here: the fence's verdicts, and that each caller
// really goes through the shared functions.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

/** An ack as jsonb items, its answer as `r`. */
const ACK = 'select r_answer as r from queen.log_ack_v2($1, $2::jsonb, null, null, null, null)';
const L = '11111111-1111-4111-8111-111111111111';
const OTHER = '22222222-2222-4222-8222-222222222222';

async function fence(offset: number, lease: string | null, cursor: number, curLease: string | null, expiresInS: number | null, last: number | null, leaseFirst: boolean) {
  const { rows } = await b.sql.query(
    `select queen.log_ack_fence_v1($1, $2::uuid, $3, $4::uuid, case when $5::int is null then null else now() + make_interval(secs => $5::int) end, $6, $7) as v`,
    [offset, lease, cursor, curLease, expiresInS, last, leaseFirst],
  );
  return rows[0].v as string | null;
}

/** Calls of the shared functions made by `sql` in one transaction (rolled back). */
async function callsOf(sql: string, values: unknown[]) {
  const c = await b.sql.connect();
  const count = `select funcname, sum(calls)::int as n from pg_stat_xact_user_functions
                  where funcname in ('log_ack_lock_v1', 'log_ack_move_v1') group by funcname`;
  try {
    await c.query('begin');
    await c.query(`set local track_functions = 'all'`);
    const before = Object.fromEntries((await c.query(count)).rows.map((r) => [r.funcname, r.n]));
    const { rows } = await c.query(sql, values);
    const after = Object.fromEntries((await c.query(count)).rows.map((r) => [r.funcname, r.n]));
    await c.query('rollback');
    const delta = (f: string) => (after[f] ?? 0) - (before[f] ?? 0);
    return { answer: rows[0].r, lock: delta('log_ack_lock_v1'), move: delta('log_ack_move_v1') };
  } finally {
    c.release();
  }
}

describe('the ack fence', () => {
  it('answers the catalogue code of the first rule an item breaks, lease first only for a cycle', async () => {
    // Past the cursor, inside the live lease it names: may move.
    expect(await fence(5, L, 2, L, 60, 8, false)).toBeNull();
    expect(await fence(5, L, 2, L, 60, 8, true)).toBeNull();
    // No lease named: only the cursor counts.
    expect(await fence(5, null, 2, OTHER, 60, 3, true)).toBeNull();
    expect(await fence(2, null, 2, null, null, null, false)).toBe('ALREADY_ACKED');
    // At or below the cursor with a stale lease: the route answers alreadyAcked, a cycle LEASE_EXPIRED (S49).
    expect(await fence(2, L, 2, null, null, null, false)).toBe('ALREADY_ACKED');
    expect(await fence(2, L, 2, null, null, null, true)).toBe('LEASE_EXPIRED');
    // Another lease, or the named one expired.
    expect(await fence(5, L, 2, OTHER, 60, 8, false)).toBe('LEASE_EXPIRED');
    expect(await fence(5, L, 2, L, -1, 8, false)).toBe('LEASE_EXPIRED');
    expect(await fence(5, L, 2, L, -1, 8, true)).toBe('LEASE_EXPIRED');
    // Beyond what the lease delivered.
    expect(await fence(9, L, 2, L, 60, 8, false)).toBe('MESSAGE_NOT_LEASED');
    expect(await fence(9, L, 2, L, 60, 8, true)).toBe('MESSAGE_NOT_LEASED');
  });
});

describe('one ack path', () => {
  it('the ack route (both paths) and a cycle source ack lock and move through the shared functions', async () => {
    const q = uniqueName('ackcore');
    await b.http('POST', '/api/v1/push', { items: Array.from({ length: 4 }, (_, i) => ({ queue: q, payload: i })) });
    const popped = (await b.http('GET', `/api/v1/pop/queue/${q}?batch=4`)).body;
    const [m1, m2] = popped.messages;
    const item = (m: any, status = 'completed') => ({ idx: 0, transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status });

    // The one-move path answers the compact form, the walk per-item results.
    const fast = await callsOf(ACK, ['__QUEUE_MODE__', JSON.stringify([item(m1)])]);
    expect(fast).toMatchObject({ lock: 1, move: 1 });
    expect(fast.answer.offsets).toEqual(['1']);

    const walked = await callsOf(ACK, ['__QUEUE_MODE__', JSON.stringify([item(m1, 'dlq')])]);
    expect(walked).toMatchObject({ lock: 1, move: 1 });
    expect(walked.answer[0]).toMatchObject({ success: true, dlq: true, code: null });

    const { body } = await b.http('POST', '/streams/v1/queries', { name: uniqueName('ackcore'), source_queue: q, config_hash: 'h' });
    const cycle = await callsOf('select queen.log_streams_cycle_v1($1::jsonb) as r', [
      JSON.stringify([{ idx: 0, query_id: body.query_id, partition_id: m2.partitionId, ack: { transactionId: m2.transactionId, leaseId: m2.leaseId, count: 2 }, release_lease: false }]),
    ]);
    expect(cycle).toMatchObject({ lock: 1, move: 1 });
    expect(cycle.answer[0].result).toMatchObject({ success: true, ack_result: { count: 2, offset: '2', lease_released: false } });
  });

  it('failures are answered by code; the broker words them from the catalogue', async () => {
    const q = uniqueName('ackcodes');
    await b.http('POST', '/api/v1/push', { items: [{ queue: q, payload: 1 }] });
    const m = (await b.http('GET', `/api/v1/pop/queue/${q}?batch=1`)).body.messages[0];
    const raw = await b.sql.query(ACK, [
      '__QUEUE_MODE__',
      JSON.stringify([{ idx: 0, transactionId: m.transactionId, partitionId: m.partitionId, leaseId: OTHER }]),
    ]);
    expect(raw.rows[0].r[0]).toMatchObject({ success: false, code: 'LEASE_EXPIRED', error: null });
    const viaRoute = await b.http('POST', '/api/v1/ack', { transactionId: m.transactionId, partitionId: m.partitionId, leaseId: OTHER });
    expect(viaRoute.body[0]).toMatchObject({ success: false, code: 'LEASE_EXPIRED', error: 'Invalid or expired lease' });
    const { body: query } = await b.http('POST', '/streams/v1/queries', { name: uniqueName('ackcodes'), source_queue: q, config_hash: 'h' });
    const element = { query_id: query.query_id, partition_id: m.partitionId, ack: { transactionId: m.transactionId, leaseId: OTHER } };
    const rawCycle = await b.sql.query('select queen.log_streams_cycle_v1($1::jsonb) as r', [JSON.stringify([{ idx: 0, ...element }])]);
    expect(rawCycle.rows[0].r[0].result).toMatchObject({ success: false, code: 'LEASE_EXPIRED', error: null });
    expect((await b.http('POST', '/streams/v1/cycle', element)).body).toMatchObject({ success: false, code: 'LEASE_EXPIRED', error: 'Invalid or expired lease' });
    const extend = await b.http('POST', `/api/v1/lease/${OTHER}/extend`, { seconds: 10 });
    expect(extend.body[0]).toMatchObject({ success: false, code: 'LEASE_NOT_FOUND', error: 'Lease not found' });
  });
});
