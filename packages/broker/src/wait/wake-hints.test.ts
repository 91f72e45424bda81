import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// Which parked pops a pop or an ack wakes (migration 017): only where
// PostgreSQL says a pop could claim something, so a consumer that drained a
// partition does not send the next parked pop to PostgreSQL for nothing;
// and a write that lands while a pop's query is in flight is not missed.

let b: TestBroker;
/** Pop statements that reached PostgreSQL, and how many of them found nothing. */
const pops = { all: 0, empty: 0, byGroup: new Map<string, number>() };
/** Set by a test to hold a pop's answer back (resolved after the query ran). */
let holdPop: (() => Promise<void>) | null = null;
beforeAll(async () => {
  b = await startTestBroker();
  const query = b.ctx.db.query.bind(b.ctx.db);
  b.ctx.db.query = (async (text: any, values?: unknown[]) => {
    const result: any = await query(text, values);
    if (typeof text === 'object' && text?.name === 'queen_pop') {
      pops.all += 1;
      pops.byGroup.set(String(values?.[2]), (pops.byGroup.get(String(values?.[2])) ?? 0) + 1);
      // Found nothing: no row carries a message (the pop's rows have no count column).
      if (!result.rows.some((r: any) => r.msg_offset !== null)) pops.empty += 1;
      const hold = holdPop;
      holdPop = null;
      if (hold) await hold();
    }
    return result;
  }) as typeof b.ctx.db.query;
});
afterAll(async () => b?.stop());

const push = (queue: string, partition: string, n: number) =>
  b.http('POST', '/api/v1/push', { items: Array.from({ length: n }, (_, i) => ({ queue, partition, payload: { i } })) });
const parkedPop = (queue: string, qs: string) => {
  const started = Date.now();
  return b.http('GET', `/api/v1/pop/queue/${queue}?wait=true&timeout=8000&${qs}`).then((r) => ({ ...r, at: Date.now(), started }));
};
const ackAll = (messages: any[], consumerGroup?: string) =>
  b.http('POST', '/api/v1/ack/batch', {
    ...(consumerGroup ? { consumerGroup } : {}),
    acknowledgments: messages.map((m) => ({ transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId })),
  });
const until = async (check: () => boolean, ms = 5000) => {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 5));
  }
};

describe('wake hints', () => {
  it('a consumer that takes and acks everything wakes no parked pop for nothing', async () => {
    const q = uniqueName('hints');
    // Three consumers parked; each push is taken whole by one of them, which
    // acks it and parks again. Before migration 017 each round sent two more
    // pops to PostgreSQL that found nothing (the next in line after the
    // answer, and one after the ack released the lease).
    const ROUNDS = 20;
    let answered = 0;
    let stop = false;
    const consumer = async () => {
      while (!stop) {
        const r = await parkedPop(q, 'batch=10');
        if (r.status !== 200) continue;
        expect((await ackAll(r.body.messages)).status).toBe(200);
        answered += r.body.messages.length;
      }
    };
    const consumers = [consumer(), consumer(), consumer()];
    await until(() => b.ctx.notifier.room.parked === 3);
    const before = { ...pops };
    const startedAt = Date.now();
    for (let i = 0; i < ROUNDS; i++) {
      expect((await push(q, 'p', 5)).status).toBe(201);
      await until(() => answered === (i + 1) * 5 && b.ctx.notifier.room.parked === 3);
    }
    const seconds = (Date.now() - startedAt) / 1000;
    const empty = pops.empty - before.empty;
    // What is left: the head of the line's once-a-second re-check, and a pop
    // whose query raced a push (it looks again instead of parking). The
    // consumer's own pop after its ack joins the two parked before it
    // without a query (it used to find nothing once per round).
    expect(empty).toBeLessThanOrEqual(Math.ceil(seconds) + 4);
    expect(pops.all - before.all - empty).toBe(ROUNDS);
    // One message on each of three partitions: each consumer takes one and stops.
    stop = true;
    expect((await b.http('POST', '/api/v1/push', { items: ['x', 'y', 'z'].map((partition) => ({ queue: q, partition, payload: partition })) })).status).toBe(201);
    await Promise.all(consumers);
    expect(answered).toBe(ROUNDS * 5 + 3);
  }, 60000);

  it('a pop joins a line of parked pops without a query, and is fed in its turn', async () => {
    const q = uniqueName('hints-join');
    const first = parkedPop(q, 'batch=1');
    await until(() => b.ctx.notifier.room.waiting(q, '__QUEUE_MODE__', null));
    const before = pops.all;
    const second = parkedPop(q, 'batch=1');
    const otherGroup = parkedPop(q, 'batch=1&consumerGroup=hints-join-other');
    await until(() => b.ctx.notifier.room.waiting(q, 'hints-join-other', null));
    // Only the other group's pop asked PostgreSQL: its line was empty.
    expect(pops.all - before).toBe(1);
    expect(pops.byGroup.get('hints-join-other')).toBe(1);
    const pushedAt = Date.now();
    // One message on each of two partitions: a pop leases the partition it claims.
    expect((await b.http('POST', '/api/v1/push', { items: ['a', 'b'].map((partition) => ({ queue: q, partition, payload: partition })) })).status).toBe(201);
    const answers = await Promise.all([first, second, otherGroup]);
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
    expect(new Set(answers.slice(0, 2).map((a) => a.body.messages[0].data))).toEqual(new Set(['a', 'b']));
    // Fed by the wake chain (the head found more), not by a re-check a second later.
    for (const a of answers) expect(a.at - pushedAt).toBeLessThan(400);
  });

  it('an ack that releases a partition with more left wakes a pop parked behind the lease at once', async () => {
    const q = uniqueName('hints-ack');
    expect((await push(q, 'p', 10)).status).toBe(201);
    const first = await b.http('GET', `/api/v1/pop/queue/${q}?batch=5`);
    expect(first.body.messages).toHaveLength(5);
    const parked = b.ctx.notifier.room.parked;
    const waiting = parkedPop(q, 'batch=10');
    await until(() => b.ctx.notifier.room.parked === parked + 1);
    await new Promise((r) => setTimeout(r, 50));
    const ackedAt = Date.now();
    expect((await ackAll(first.body.messages)).body.at(-1).leaseReleased).toBe(true);
    const second = await waiting;
    expect(second.status).toBe(200);
    expect(second.body.messages.map((m: any) => m.data.i)).toEqual([5, 6, 7, 8, 9]);
    // Without the wake the pop would wait for its line's re-check, a second after it parked.
    expect(second.at - ackedAt).toBeLessThan(400);
  });

  it("an ack wakes its own group's parked pop, not another group's", async () => {
    const q = uniqueName('hints-groups');
    expect((await push(q, 'p', 10)).status).toBe(201);
    const a = await b.http('GET', `/api/v1/pop/queue/${q}?batch=5&consumerGroup=ga`);
    expect(a.body.messages).toHaveLength(5);
    const done = await b.http('GET', `/api/v1/pop/queue/${q}?batch=10&consumerGroup=gb`);
    expect(done.body.messages).toHaveLength(10);
    expect((await ackAll(done.body.messages, 'gb')).status).toBe(200);
    // Both groups park: ga behind its own lease, gb caught up.
    const parked = b.ctx.notifier.room.parked;
    const waitingA = parkedPop(q, 'batch=10&consumerGroup=ga');
    const waitingB = parkedPop(q, 'batch=10&consumerGroup=gb');
    await until(() => b.ctx.notifier.room.parked === parked + 2);
    const gbBefore = pops.byGroup.get('gb') ?? 0;
    const ackedAt = Date.now();
    expect((await ackAll(a.body.messages, 'ga')).body.at(-1).leaseReleased).toBe(true);
    const answerA = await waitingA;
    expect(answerA.body.messages.map((m: any) => m.data.i)).toEqual([5, 6, 7, 8, 9]);
    expect(answerA.at - ackedAt).toBeLessThan(400);
    await new Promise((r) => setTimeout(r, 150));
    // gb's cursor and lease are its own: the ack gave it nothing to look for.
    expect((pops.byGroup.get('gb') ?? 0) - gbBefore).toBe(0);
    expect((await push(q, 'p', 1)).status).toBe(201);
    expect((await waitingB).body.messages).toHaveLength(1);
  });

  it('a pop that leaves more for the next parked pop wakes it at once', async () => {
    const q = uniqueName('hints-more');
    const parked = b.ctx.notifier.room.parked;
    const waiting = [parkedPop(q, 'batch=1'), parkedPop(q, 'batch=1')];
    await until(() => b.ctx.notifier.room.parked === parked + 2);
    const pushedAt = Date.now();
    expect((await b.http('POST', '/api/v1/push', { items: [{ queue: q, partition: 'a', payload: 1 }, { queue: q, partition: 'b', payload: 2 }] })).status).toBe(201);
    const answers = await Promise.all(waiting);
    expect(answers.map((a) => a.status)).toEqual([200, 200]);
    expect(answers.map((a) => a.body.messages[0].data).sort()).toEqual([1, 2]);
    for (const a of answers) expect(a.at - pushedAt).toBeLessThan(400);
  });

  it('a push that commits while a pop query is finding nothing is not missed', async () => {
    const q = uniqueName('hints-race');
    // The pop's statement runs (nothing there yet), and before its answer
    // reaches the route a push commits: nobody is parked, so the push wakes
    // no one. The pop must look again, not park until its re-check.
    let pushedAt = 0;
    holdPop = async () => {
      expect((await push(q, 'p', 1)).status).toBe(201);
      pushedAt = Date.now();
    };
    const r = await parkedPop(q, 'batch=10');
    expect(r.status).toBe(200);
    expect(r.body.messages).toHaveLength(1);
    expect(r.at - pushedAt).toBeLessThan(400);
  });
});
