import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// Many parked long-poll pops (issue: 1,000 waiting consumers): a push wakes
// the pops it can feed, not all of them; parked pops do not each re-query
// PostgreSQL every second; other routes keep answering while they wait.

let b: TestBroker;
let popQueries = 0;
beforeAll(async () => {
  b = await startTestBroker();
  // Count the pop statements that reach PostgreSQL (pop.ts runs them as the named statement queen_pop).
  const query = b.ctx.db.query.bind(b.ctx.db);
  b.ctx.db.query = ((text: any, values?: unknown[]) => {
    if (typeof text === 'object' && text?.name === 'queen_pop') popQueries += 1;
    return query(text, values);
  }) as typeof b.ctx.db.query;
});
afterAll(async () => b?.stop());

const PARKED = 300;

describe('many parked pops', () => {
  it('a one-message push wakes one pop; the rest stay parked, re-check at one query a second, and each gets one message later', async () => {
    const q = uniqueName('many');
    const answers: { status: number; body: any; at: number }[] = [];
    const pops = Array.from({ length: PARKED }, () =>
      b.http('GET', `/api/v1/pop/queue/${q}?wait=true&timeout=20000&autoAck=true`).then((r) => answers.push({ status: r.status, body: r.body, at: Date.now() })));
    await eventually(async () => b.ctx.notifier.room.parked === PARKED, 15000);

    // Idle: one line, so about one query a second however many wait.
    let before = popQueries;
    await new Promise((r) => setTimeout(r, 2100));
    expect(popQueries - before).toBeLessThanOrEqual(3);

    // Other routes answer while they wait.
    const other = uniqueName('other');
    const latencies: number[] = [];
    for (let i = 0; i < 40; i++) {
      const t = Date.now();
      expect((await b.http('POST', '/api/v1/push', { items: [{ queue: other, payload: i }] })).status).toBe(201);
      latencies.push(Date.now() - t);
    }
    latencies.sort((x, y) => x - y);
    expect(latencies[Math.floor(latencies.length * 0.99)]).toBeLessThan(1000);

    // One message: one pop answered (plus at most the next one looking and re-parking).
    before = popQueries;
    const pushedAt = Date.now();
    expect((await b.http('POST', '/api/v1/push', { items: [{ queue: q, payload: 'one' }] })).status).toBe(201);
    await eventually(async () => answers.length === 1, 5000);
    expect(answers[0]!.status).toBe(200);
    expect(answers[0]!.at - pushedAt).toBeLessThan(1000);
    await new Promise((r) => setTimeout(r, 300));
    expect(answers).toHaveLength(1);
    expect(popQueries - before).toBeLessThanOrEqual(4);
    expect(b.ctx.notifier.room.parked).toBe(PARKED - 1);

    // The rest, one push of PARKED - 1: each parked pop (autoAck: no lease holds the partition) takes one message, passing the wake-up on.
    expect((await b.http('POST', '/api/v1/push', { items: Array.from({ length: PARKED - 1 }, (_, i) => ({ queue: q, payload: i })) })).status).toBe(201);
    await Promise.all(pops);
    expect(answers.map((a) => a.status)).toEqual(answers.map(() => 200));
    expect(answers.reduce((n, a) => n + a.body.messages.length, 0)).toBe(PARKED);
  }, 60000);
});
