import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBroker, type TestBroker } from '@queen-mq/testing';

// The `traceparent` extension (PROTOCOL §5.3/§5.4, migration 010): the W3C
// trace context a message was pushed in is stored beside it and handed back
// by pop, on every write path (push, transaction, cycle sink push), on
// encrypted queues too. Pop reads it only for messages with a traceId.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker({ config: { encryptionKey: 'ab'.repeat(32) } });
});
afterAll(async () => b?.stop());

const TP = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
const TRACE_ID = '0af76519-16cd-43dd-8448-eb211c80319c';

async function popAll(queue: string) {
  const res = await b.http('GET', `/api/v1/pop/queue/${queue}?batch=10&autoAck=true`);
  expect(res.status).toBe(200);
  return res.body.messages as Array<{ data: unknown; traceId: string | null; traceparent: string | null }>;
}

describe('traceparent on messages', () => {
  it('push stores it and pop answers it; a message without one answers null', async () => {
    const push = await b.http('POST', '/api/v1/push', {
      items: [
        { queue: 'tp-plain', payload: 1, traceId: TRACE_ID, traceparent: TP },
        { queue: 'tp-plain', payload: 2 },
        { queue: 'tp-plain', payload: 3, traceId: TRACE_ID },
      ],
    });
    expect(push.status).toBe(201);
    const messages = await popAll('tp-plain');
    expect(messages.map((m) => [m.data, m.traceId, m.traceparent])).toEqual([
      [1, TRACE_ID, TP],
      [2, null, null],
      [3, TRACE_ID, null],
    ]);
  });

  it('an encrypted queue and a transaction push carry it too', async () => {
    expect((await b.http('POST', '/api/v1/configure', { queue: 'tp-enc', options: { encryptionEnabled: true } })).status).toBe(200);
    const tx = await b.http('POST', '/api/v1/transaction', {
      operations: [{ type: 'push', items: [{ queue: 'tp-enc', payload: { secret: 1 }, traceId: TRACE_ID, traceparent: TP }] }],
    });
    expect(tx.status).toBe(200);
    const [m] = await popAll('tp-enc');
    expect(m).toMatchObject({ data: { secret: 1 }, traceId: TRACE_ID, traceparent: TP });
  });

  it('a malformed traceparent is a 400 and nothing is written', async () => {
    for (const bad of ['01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', `00-${'0'.repeat(32)}-b7ad6b7169203331-01`, TP.toUpperCase(), 'x']) {
      const res = await b.http('POST', '/api/v1/push', { items: [{ queue: 'tp-bad', payload: 1 }, { queue: 'tp-bad', payload: 2, traceparent: bad }] });
      expect(res.status, bad).toBe(400);
      expect(res.body.code).toBe('VALIDATION_FAILED');
    }
    expect((await b.http('GET', '/api/v1/pop/queue/tp-bad')).status).toBe(204);
  });

  it('a message committed while a pop is under way answers its traceparent (the pop reads it in the snapshot that found the message)', async () => {
    // The pop statement starts, then waits inside (its named group's
    // subscription row is being inserted by another transaction); a traced
    // push commits meanwhile; the pop then finds that message. Read in the
    // statement's first snapshot, its traceparent was null.
    await b.http('POST', '/api/v1/push', { items: [{ queue: 'tp-race', payload: 'first' }] });
    const { rows: [q] } = await b.sql.query(`select id from queen.queues where name = 'tp-race'`);
    const blocker = await b.sql.connect();
    try {
      await blocker.query('begin');
      await blocker.query(`insert into queen.subscriptions (consumer_group, queue_id, mode, start_at) values ('tp-race-group', $1, 'all', null)`, [q.id]);
      const pop = b.http('GET', '/api/v1/pop/queue/tp-race?batch=10&autoAck=true&consumerGroup=tp-race-group');
      // The pop is waiting on the blocker's row once PostgreSQL says so.
      for (let i = 0; ; i++) {
        const { rows } = await b.sql.query(`select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and query like '%log_pop_v4%'`);
        if (rows[0].n > 0) break;
        if (i > 200) throw new Error('the pop never waited');
        await new Promise((r) => setTimeout(r, 10));
      }
      expect((await b.http('POST', '/api/v1/push', { items: [{ queue: 'tp-race', payload: 'traced', traceId: TRACE_ID, traceparent: TP }] })).status).toBe(201);
      await blocker.query('rollback');
      const res = await pop;
      expect(res.status).toBe(200);
      expect(res.body.messages.map((m: any) => [m.data, m.traceId, m.traceparent])).toEqual([
        ['first', null, null],
        ['traced', TRACE_ID, TP],
      ]);
    } finally {
      blocker.release();
    }
  });
});
