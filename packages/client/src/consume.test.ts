import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { Queen, type PoppedMessage } from './index.js';

let b: TestBroker;
let queen: Queen;
beforeAll(async () => {
  b = await startTestBroker();
  queen = new Queen({ url: b.url });
});
afterAll(async () => {
  await queen?.close();
  await b?.stop();
});

async function cursors(queue: string): Promise<Record<string, string>> {
  const { rows } = await b.sql.query<{ name: string; cursor: string }>(
    `select p.name, c.cursor_offset::text as cursor from queen.cursors c join queen.partitions p on p.id = c.partition_id
      where p.queue_name = $1 and c.consumer_group = '__QUEUE_MODE__'`,
    [queue],
  );
  return Object.fromEntries(rows.map((r) => [r.name, r.cursor]));
}

describe('consume loop', () => {
  it('concurrency 2 processes 200 messages exactly once, in partition order, and stops gracefully', async () => {
    const q = queen.queue(uniqueName('cons'));
    const partitions = ['p0', 'p1', 'p2', 'p3'];
    for (const p of partitions) {
      await q.partition(p).push(Array.from({ length: 50 }, (_, i) => ({ payload: { p, i }, transactionId: `${p}-${i}` })));
    }

    const seen = new Map<string, number>();
    const order = new Map<string, number[]>();
    let inFlight = 0;
    let maxInFlight = 0;
    const consumer = q.consume(
      async (m) => {
        inFlight++;
        maxInFlight = Math.max(maxInFlight, inFlight);
        const { p, i } = m.data as { p: string; i: number };
        seen.set(m.transactionId, (seen.get(m.transactionId) ?? 0) + 1);
        order.set(p, [...(order.get(p) ?? []), i]);
        await new Promise((r) => setTimeout(r, 2));
        inFlight--;
      },
      { batch: 10, concurrency: 2, wait: 5000 },
    );

    await eventually(async () => seen.size === 200, 30000);
    const stopped = Date.now();
    await consumer.stop();
    // stop() abandons the parked long polls instead of waiting out their 5 s.
    expect(Date.now() - stopped).toBeLessThan(3000);

    expect([...seen.values()].every((n) => n === 1)).toBe(true);
    expect(maxInFlight).toBe(2);
    for (const p of partitions) expect(order.get(p)).toEqual(Array.from({ length: 50 }, (_, i) => i));
    expect(await cursors(q.name)).toEqual({ p0: '50', p1: '50', p2: '50', p3: '50' });
    // Nothing left and nothing leased.
    expect(await q.pop({ batch: 10 })).toBeNull();
  });

  it('stop() waits for the in-flight message to finish and acks it', async () => {
    const q = queen.queue(uniqueName('stop'));
    await q.push([{ payload: 1 }, { payload: 2 }]);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const handled: unknown[] = [];
    let started!: () => void;
    const startedP = new Promise<void>((r) => (started = r));
    const consumer = q.consume(
      async (m) => {
        started();
        await gate;
        handled.push(m.data);
      },
      { batch: 1, wait: 1000 },
    );
    await startedP;
    const stopping = consumer.stop();
    let stopDone = false;
    void stopping.then(() => (stopDone = true));
    await new Promise((r) => setTimeout(r, 200));
    expect(stopDone).toBe(false);
    release();
    await stopping;
    expect(handled).toEqual([1]);
    expect(await cursors(q.name)).toEqual({ Default: '1' });
  });

  it('a handler throw acks failed and the message is redelivered with retryCount 1; later ones wait for it', async () => {
    const q = queen.queue(uniqueName('fail'));
    await q.push([{ payload: 'a' }, { payload: 'b' }, { payload: 'c' }]);
    const deliveries: [unknown, number][] = [];
    const errors: unknown[] = [];
    let thrown = false;
    const consumer = q.consume(
      (m: PoppedMessage) => {
        deliveries.push([m.data, m.retryCount]);
        if (m.data === 'b' && !thrown) {
          thrown = true;
          throw new Error('boom on b');
        }
      },
      { batch: 3, wait: 1000, onError: (err) => errors.push(err) },
    );
    await eventually(async () => (await cursors(q.name)).Default === '3', 20000);
    await consumer.stop();
    // c was in the failing batch after b: it is not handled before b's redelivery.
    expect(deliveries).toEqual([
      ['a', 0],
      ['b', 0],
      ['b', 1],
      ['c', 0],
    ]);
    expect(errors.map((e) => (e as Error).message)).toEqual(['boom on b']);
    const { rows } = await b.sql.query(`select count(*)::int as n from queen.dlq d join queen.partitions p on p.id = d.partition_id where p.queue_name = $1`, [q.name]);
    expect(rows[0].n).toBe(0);
  });

  it('each:false hands the whole batch to the handler and acks it', async () => {
    const q = queen.queue(uniqueName('batch'));
    await q.push(Array.from({ length: 7 }, (_, i) => i));
    const batches: number[][] = [];
    const ac = new AbortController();
    const consumer = q.consume(
      (ms: PoppedMessage[]) => {
        batches.push(ms.map((m) => m.data as number));
      },
      { each: false, batch: 5, wait: 1000, signal: ac.signal },
    );
    await eventually(async () => (await cursors(q.name)).Default === '7', 20000);
    ac.abort();
    await consumer.done;
    expect(batches).toEqual([
      [0, 1, 2, 3, 4],
      [5, 6],
    ]);
  });
});
