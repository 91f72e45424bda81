import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleep, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// Long-poll (PROTOCOL §3.8): in-process wake-ups, NOTIFY across replicas,
// timeouts and abandoned waits, over real HTTP.

let a: TestBroker;
let b: TestBroker;
beforeAll(async () => {
  a = await startTestBroker();
  b = await startTestBroker({ databaseUrl: a.databaseUrl });
});
afterAll(async () => {
  await b?.stop();
  await a?.stop();
});

const push = (broker: TestBroker, queue: string, payload: unknown) => broker.http('POST', '/api/v1/push', { items: [{ queue, payload }] });

describe('long-poll', () => {
  it('B13 a parked pop on a queue that does not exist yet is answered by the first push', async () => {
    const q = uniqueName('b13');
    const t0 = Date.now();
    const parked = a.http('GET', `/api/v1/pop/queue/${q}?wait=true&timeout=10000`);
    await sleep(1000);
    expect((await push(a, q, { hello: 1 })).status).toBe(201);
    const r = await parked;
    const took = Date.now() - t0;
    expect(r.status).toBe(200);
    expect(r.body.messages.map((m: any) => m.data)).toEqual([{ hello: 1 }]);
    expect(took).toBeLessThan(2500);
  });

  it('B13 without a push the parked pop answers 204 after its timeout', async () => {
    const q = uniqueName('b13t');
    const t0 = Date.now();
    const r = await a.http('GET', `/api/v1/pop/queue/${q}?wait=true&timeout=10000`);
    const took = Date.now() - t0;
    expect(r.status).toBe(204);
    expect(took).toBeGreaterThanOrEqual(10000);
    expect(took).toBeLessThan(11500);
  }, 20000);

  it('B14 a pop parked on A is woken by a push through B well under a second', async () => {
    const latencies: number[] = [];
    for (let round = 0; round < 3; round++) {
      const q = uniqueName('b14');
      const parked = a.http('GET', `/api/v1/pop/queue/${q}?wait=true&timeout=10000`);
      // Push right after the parked pop's periodic 1 s re-check has passed, so
      // only a NOTIFY can answer it quickly.
      await sleep(1150);
      const t0 = Date.now();
      expect((await push(b, q, { round })).status).toBe(201);
      const r = await parked;
      latencies.push(Date.now() - t0);
      expect(r.status).toBe(200);
      expect(r.body.messages[0].data).toEqual({ round });
    }
    console.log(`B14 wake-up latency across replicas (ms): ${latencies.join(', ')}`);
    for (const ms of latencies) expect(ms).toBeLessThan(1000);
    expect([...latencies].sort((x, y) => x - y)[1]).toBeLessThan(500);
  });

  it('a parked pop is not answered by a push to another queue', async () => {
    const q = uniqueName('mine');
    const t0 = Date.now();
    const parked = a.http('GET', `/api/v1/pop/queue/${q}?wait=true&timeout=1500`);
    await sleep(200);
    await push(b, uniqueName('other'), 1);
    const r = await parked;
    expect(r.status).toBe(204);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1500);
  });

  it('a client that disconnects abandons its parked pop without claiming anything', async () => {
    const q = uniqueName('gone');
    const ctl = new AbortController();
    const parked = fetch(`${a.url}/api/v1/pop/queue/${q}?wait=true&timeout=10000`, { signal: ctl.signal }).catch(() => 'aborted');
    await sleep(300);
    ctl.abort();
    expect(await parked).toBe('aborted');
    await sleep(300);
    await push(a, q, { x: 1 });
    await sleep(300);
    const r = await a.http('GET', `/api/v1/pop/queue/${q}?batch=10`);
    expect(r.status).toBe(200);
    expect(r.body.messages).toHaveLength(1);
  });

  it('shutdown answers parked pops with 204, without another claim', async () => {
    const c = await startTestBroker({ databaseUrl: a.databaseUrl });
    const q = uniqueName('shutdown');
    // The first pop parks after its claim found nothing; the second joins its line.
    const parked = [c.http('GET', `/api/v1/pop/queue/${q}?wait=true&timeout=20000`)];
    await sleep(300);
    parked.push(c.http('GET', `/api/v1/pop/queue/${q}?wait=true&timeout=20000`));
    await sleep(300);
    const sent: string[] = [];
    const query = c.ctx.db.query;
    c.ctx.db.query = (async (text: any, values?: unknown[]) => {
      sent.push(typeof text === 'object' ? text.name : text);
      return query.call(c.ctx.db, text, values);
    }) as typeof query;
    const t0 = Date.now();
    const stopping = c.stop();
    const answers = await Promise.all(parked);
    await stopping;
    expect(answers.map((r) => r.status)).toEqual([204, 204]);
    expect(Date.now() - t0).toBeLessThan(3000);
    expect(sent.filter((n) => n === 'queen_pop')).toEqual([]);
  });
});
