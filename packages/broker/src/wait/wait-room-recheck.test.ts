import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, sleep, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { SWEEP_LINES } from './wait-room.js';

// The wait room's once-a-second re-check: pops parked on many
// distinct queues with nothing for them cost one statement a second, not a
// pop each; a line with a message held back (a lease another broker's ack
// releases, a delay) still looks every second; a write whose NOTIFY was lost
// is still found, by the sweep; pops paused through another broker still
// answer within about a second.

let a: TestBroker;
let b: TestBroker;
/** Statements broker `a` sent to PostgreSQL, and how many of them were pops. */
const sent = { statements: 0, pops: 0 };
beforeAll(async () => {
  // The timer and schedule pollers of `a` sleep through the test: what is counted is the wait room's.
  a = await startTestBroker({ config: { timerPollMs: 600_000, scheduleMaxSleepMs: 600_000 } });
  b = await startTestBroker({ databaseUrl: a.databaseUrl });
  const db = a.ctx.db;
  const query = db.query.bind(db);
  db.query = ((text: any, values?: unknown[]) => {
    sent.statements += 1;
    if (typeof text === 'object' && text?.name === 'queen_pop') sent.pops += 1;
    return query(text, values);
  }) as typeof db.query;
  const transaction = db.transaction.bind(db);
  db.transaction = ((fn: any) => {
    sent.statements += 1;
    return transaction(fn);
  }) as typeof db.transaction;
});
afterAll(async () => {
  await b?.stop();
  await a?.stop();
});

const push = (broker: TestBroker, items: unknown[]) => broker.http('POST', '/api/v1/push', { items });
const popPath = (q: string, query = '', timeoutMs = 20000) => `/api/v1/pop/queue/${q}?wait=true&timeout=${timeoutMs}${query}`;

describe('wait room re-check', () => {
  it('pops parked on 400 distinct queues with nothing for them cost at most one statement a second, and no pop', async () => {
    // Half on queues that hold messages (5 partitions each) the parked group
    // never sees (it subscribes from now), half on queues that do not exist.
    const seeded = Array.from({ length: 200 }, () => uniqueName('held'));
    expect((await push(a, seeded.flatMap((queue) => Array.from({ length: 5 }, (_, p) => ({ queue, partition: `p${p}`, payload: p }))))).status).toBe(201);
    const missing = Array.from({ length: 200 }, () => uniqueName('none'));
    // Timing out before the next test, whose lines must be the only ones parked.
    const answers = [
      ...seeded.map((q) => a.http('GET', popPath(q, '&consumerGroup=g&subscriptionMode=new', 9000))),
      ...missing.map((q) => a.http('GET', popPath(q, '', 9000))),
    ];
    await eventually(async () => a.ctx.notifier.room.parked === 400, 15000);
    // The first re-check asks about every line once.
    await sleep(1500);
    const before = { ...sent };
    await sleep(3000);
    const statements = sent.statements - before.statements;
    const pops = sent.pops - before.pops;
    console.log(`400 parked pops, 3 s: ${statements} statements, ${pops} pops`);
    expect(pops).toBe(0);
    // One re-check a second, plus one for the timing's edges. Each line
    // re-checked by a pop, as before, was 400 pops a second.
    expect(statements).toBeLessThanOrEqual(4);

    // Still woken by a write, at once.
    const pushedAt = Date.now();
    expect((await push(a, [{ queue: seeded[7], partition: 'p3', payload: 'seeded' }, { queue: missing[9], payload: 'missing' }])).status).toBe(201);
    const [s, m] = await Promise.all([answers[7]!, answers[200 + 9]!]);
    expect([s.status, s.body.messages[0].data, m.status, m.body.messages[0].data]).toEqual([200, 'seeded', 200, 'missing']);
    expect(Date.now() - pushedAt).toBeLessThan(500);
    expect(a.ctx.notifier.room.parked).toBe(398);
    expect((await Promise.all(answers)).filter((r) => r.status === 204)).toHaveLength(398);
  }, 60000);

  it('a pop parked behind a lease is answered within about a second of the ack through another broker', async () => {
    const q = uniqueName('lease');
    await push(a, [{ queue: q, payload: 1 }, { queue: q, payload: 2 }]);
    const first = await b.http('GET', `/api/v1/pop/queue/${q}?batch=1`);
    expect(first.body.messages[0].data).toBe(1);
    const parked = a.http('GET', popPath(q));
    await eventually(async () => a.ctx.notifier.room.waiting(q, '__QUEUE_MODE__', null));
    await sleep(300);
    // Acked through b, which publishes no wake-up for an ack.
    const m = first.body.messages[0];
    const ackedAt = Date.now();
    expect((await b.http('POST', '/api/v1/ack', { transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status: 'completed' })).status).toBe(200);
    const r = await parked;
    expect([r.status, r.body.messages[0].data]).toEqual([200, 2]);
    expect(Date.now() - ackedAt).toBeLessThan(1600);
  });

  it('a delayed message is answered to a parked pop within about a second of becoming visible', async () => {
    const q = uniqueName('delayed');
    await a.http('POST', '/api/v1/configure', { queue: q, options: { delayedProcessing: 1 } });
    const parked = a.http('GET', popPath(q));
    await eventually(async () => a.ctx.notifier.room.waiting(q, '__QUEUE_MODE__', null));
    const pushedAt = Date.now();
    await push(b, [{ queue: q, payload: 'later' }]);
    const r = await parked;
    expect([r.status, r.body.messages[0].data]).toEqual([200, 'later']);
    const took = Date.now() - pushedAt;
    expect(took).toBeGreaterThanOrEqual(950);
    expect(took).toBeLessThan(2600);
  });

  it('a write whose NOTIFY never came is found by the sweep', async () => {
    const q = uniqueName('lost');
    const parked = a.http('GET', popPath(q));
    await eventually(async () => a.ctx.notifier.room.waiting(q, '__QUEUE_MODE__', null));
    // Its line was asked about once and had nothing: from now on only the sweep asks.
    await sleep(1500);
    // b publishes nothing (a broker that died between its commit and its NOTIFY).
    const notify = b.ctx.notifier.notify.bind(b.ctx.notifier);
    b.ctx.notifier.notify = (queue, partitions) => b.ctx.notifier.room.wake(queue, partitions);
    try {
      const pushedAt = Date.now();
      await push(b, [{ queue: q, payload: 'unannounced' }]);
      const r = await parked;
      expect([r.status, r.body.messages[0].data]).toEqual([200, 'unannounced']);
      // Fewer than SWEEP_LINES lines are parked: each is swept every second.
      expect(a.ctx.notifier.room.parked).toBeLessThan(SWEEP_LINES);
      expect(Date.now() - pushedAt).toBeLessThan(1600);
    } finally {
      b.ctx.notifier.notify = notify;
    }
  });

  it('pops paused through another broker answer a parked pop within about a second', async () => {
    const q = uniqueName('paused');
    const parked = a.http('GET', popPath(q));
    await eventually(async () => a.ctx.notifier.room.waiting(q, '__QUEUE_MODE__', null));
    await sleep(1200);
    const pausedAt = Date.now();
    await b.http('POST', '/api/v1/system/maintenance/pop', { enabled: true });
    try {
      const r = await parked;
      expect(r.status).toBe(204);
      expect(r.headers.get('x-queen-pop-paused')).toBe('true');
      expect(Date.now() - pausedAt).toBeLessThan(1600);
    } finally {
      await b.http('POST', '/api/v1/system/maintenance/pop', { enabled: false });
    }
  });
});
