import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { PUSH_RUN_SQL } from '../sql/queen.log_append_v1.js';
import { ACK_SQL, ackParams } from '../sql/queen.log_ack_v2.js';
import { POP_SQL } from '../sql/queen.log_pop_v4.js';

// Round trips of the hot paths: which named statements a push, a consumer's
// pop and ack send to PostgreSQL. A push to one partition is one call of the
// allocator, queen.log_append_v1; one over several partitions goes through
// queen.log_push_many_v1. An ack is one call of queen.log_ack_v2, a pop's
// run that its cheapest check declines included (it used to come
// back for a second statement); an untraced pop is one statement, and only a
// pop that claimed traced messages reads their traceparents in a second.

let b: TestBroker;
/** The named statements sent since the last test began, in order. */
const statements: string[] = [];
beforeAll(async () => {
  // The listing totals' background recount (a statement of its own, a second
  // after a write) would land among a request's statements on a slow machine.
  b = await startTestBroker({ config: { listingTotalsMs: 600_000 } });
  const query = b.ctx.db.query;
  b.ctx.db.query = (async (text: any, values?: unknown[]) => {
    if (typeof text === 'object') statements.push(text.name);
    return query.call(b.ctx.db, text, values);
  }) as typeof query;
});
afterAll(async () => b?.stop());
beforeEach(() => {
  statements.length = 0;
});

const push = (queue: string, items: object[]) => b.http('POST', '/api/v1/push', { items: items.map((i) => ({ queue, partition: 'p', ...i })) });

describe('hot-path statements', () => {
  it("a push to one partition is one statement of the partition's allocator; a push over two goes through log_push_many_v1", async () => {
    const q = uniqueName('stmt-push');
    const one = await push(q, [{ payload: 1 }, { payload: 2, transactionId: 't-2' }, { payload: 3, transactionId: 't-2' }]);
    expect(statements).toEqual(['queen_push_run']);
    expect(one.body.map((r: any) => [r.status, r.offset, r.transaction_id, r.queueName])).toEqual([
      ['queued', '1', one.body[0].message_id, q], ['queued', '2', 't-2', q], ['duplicate', '2', 't-2', q],
    ]);
    statements.length = 0;
    const two = await b.http('POST', '/api/v1/push', { items: [{ queue: q, partition: 'p', payload: 4 }, { queue: q, partition: 'other', payload: 5 }] });
    expect(statements.filter((s) => s.startsWith('queen_push'))).toEqual(['queen_push_many']);
    expect(two.body.map((r: any) => [r.status, r.offset])).toEqual([['queued', '3'], ['queued', '1']]);
    const stored = await b.sql.query(`select p.name, m.msg_offset::int as o, m.payload from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1 order by p.name, m.msg_offset`, [q]);
    expect(stored.rows).toEqual([{ name: 'other', o: 1, payload: 5 }, { name: 'p', o: 1, payload: 1 }, { name: 'p', o: 2, payload: 2 }, { name: 'p', o: 3, payload: 4 }]);
  });

  it("a pop's ack as our client sends it is one statement; so is its repeat, which the run check declines", async () => {
    const q = uniqueName('stmt-ack');
    await push(q, Array.from({ length: 10 }, (_, i) => ({ payload: i })));
    const msgs = (await b.http('GET', `/api/v1/pop/queue/${q}?batch=10`)).body.messages as any[];
    const ack = { acknowledgments: msgs.map((m) => ({ transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, offset: m.offset })) };
    statements.length = 0;
    const first = await b.http('POST', '/api/v1/ack/batch', ack);
    expect(statements).toEqual(['queen_ack']);
    expect(first.body).toEqual(msgs.map((m, index) => ({
      index, transactionId: m.transactionId, success: true, error: null, code: null, queueName: q, partitionName: 'p',
      leaseReleased: index === 9, dlq: false, offset: m.offset, alreadyAcked: false,
    })));
    statements.length = 0;
    const again = await b.http('POST', '/api/v1/ack/batch', ack);
    expect(statements).toEqual(['queen_ack']);
    expect(again.body.map((r: any) => [r.success, r.alreadyAcked])).toEqual(msgs.map(() => [true, true]));
    const cur = await b.sql.query(`select cursor_offset::int as c, lease_id from queen.cursors c join queen.partitions p on p.id = c.partition_id where p.queue_name = $1`, [q]);
    expect(cur.rows).toEqual([{ c: 10, lease_id: null }]);
  });

  it('an untraced pop is one statement; a pop of traced messages reads their traceparents in one more', async () => {
    const q = uniqueName('stmt-pop');
    const TP = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const popAll = async () => ((await b.http('GET', `/api/v1/pop/queue/${q}?batch=10&autoAck=true`)).body.messages as any[]).map((m) => m.traceparent);
    await push(q, [{ payload: 1 }, { payload: 2 }]);
    statements.length = 0;
    expect(await popAll()).toEqual([null, null]);
    expect(statements).toEqual(['queen_pop']);
    await push(q, [{ payload: 3 }, { payload: 4, traceId: '0af76519-16cd-43dd-8448-eb211c80319c', traceparent: TP }]);
    statements.length = 0;
    expect(await popAll()).toEqual([null, TP]);
    expect(statements).toEqual(['queen_pop', 'queen_pop_traceparents']);
  });

  it('each hot statement is planned once per connection: PostgreSQL caches a generic plan for it', async () => {
    // A parameter that a custom plan folds away (a boolean choosing a CASE
    // branch, say) makes the generic plan look dearer forever, and the
    // statement is then planned again on every call.
    const q = uniqueName('stmt-plan');
    const pushed = await push(q, [{ payload: 1 }]);
    const partitionId = pushed.body[0].partition_id as string;
    const calls: [{ name: string; text: string }, unknown[]][] = [
      [PUSH_RUN_SQL, [partitionId, JSON.stringify([{ payload: 2 }]), null]],
      [POP_SQL, [q, null, '__QUEUE_MODE__', 10, 1, false, randomUUID(), 'all', null, 8 << 20, false, null, null]],
      [POP_SQL, [q, 'p', '__QUEUE_MODE__', 10, 1, false, randomUUID(), 'all', null, 8 << 20, true, null, null]],
      [ACK_SQL.skip, ackParams('__QUEUE_MODE__', { run: { partitionId, leaseId: null, offsets: ['1'], txids: ['no-such-id'] } })],
      [ACK_SQL.ask, ackParams('__QUEUE_MODE__', { run: { partitionId, leaseId: null, offsets: ['1'], txids: ['no-such-id'] } })],
      [ACK_SQL.skip, ackParams('__QUEUE_MODE__', { items: [{ idx: 0, transactionId: 'no-such-id', partitionId }], partitionIds: [partitionId] })],
      [ACK_SQL.ask, ackParams('__QUEUE_MODE__', { items: [{ idx: 0, transactionId: 'no-such-id', partitionId }], partitionIds: [partitionId] })],
    ];
    const c = await b.sql.connect();
    try {
      for (let i = 0; i < 8; i++) for (const [statement, values] of calls) await c.query({ ...statement, values });
      const { rows } = await c.query<{ name: string; generic_plans: string }>('select name, generic_plans from pg_prepared_statements order by name');
      expect(rows.map((r) => r.name)).toEqual([...new Set(calls.map(([s]) => s.name))].sort());
      for (const r of rows) expect(Number(r.generic_plans), r.name).toBeGreaterThan(0);
    } finally {
      c.release(true);
    }
  });
});
