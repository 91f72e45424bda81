import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { startTestBroker, type TestBroker } from '@queen-mq/testing';

// A pop of the whole queue serves pending partitions in turn (claimOrder
// 'fair', the default): a partition that turns pending waits at most one
// batch of each other busy partition, not for their backlog. Weights
// (partitionWeights) give a partition that many turns in a row; a
// conflating group (conflatedGroups) gets only the newest message of each
// partition and its ack consumes everything behind it. Counted in pops and
// messages, not in time.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => {
  await b?.stop();
});

const uniqueName = (tag: string) => `${tag}-${randomUUID().slice(0, 8)}`;

interface Msg {
  partition: string;
  partitionId: string;
  offset: string;
  transactionId: string;
  leaseId: string;
  data: unknown;
}

async function configure(queue: string, options: Record<string, unknown>) {
  const r = await b.http('POST', '/api/v1/configure', { queue, options });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body;
}

async function push(items: { queue: string; partition: string; payload: unknown }[]) {
  for (let i = 0; i < items.length; i += 1000) {
    const r = await b.http('POST', '/api/v1/push', { items: items.slice(i, i + 1000) });
    expect(r.status).toBe(201);
  }
}

const flood = (queue: string, partition: string, n: number) => Array.from({ length: n }, (_, i) => ({ queue, partition, payload: { i } }));

async function pop(queue: string, query = ''): Promise<Msg[]> {
  const r = await b.http('GET', `/api/v1/pop/queue/${queue}?wait=false&batch=10${query ? `&${query}` : ''}`);
  if (r.status === 204) return [];
  expect(r.status).toBe(200);
  return r.body.messages as Msg[];
}

async function ack(messages: Msg[], group?: string) {
  if (messages.length === 0) return;
  const r = await b.http('POST', '/api/v1/ack/batch', {
    acknowledgments: messages.map((m) => ({ transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, offset: m.offset })),
    ...(group ? { consumerGroup: group } : {}),
  });
  expect(r.status).toBe(200);
}

/** Offsets seen per partition must only go up. */
function checkOrder(seen: Map<string, bigint>, messages: Msg[]) {
  for (const m of messages) {
    const last = seen.get(m.partition) ?? 0n;
    expect(BigInt(m.offset), `${m.partition} out of order`).toBeGreaterThan(last);
    seen.set(m.partition, BigInt(m.offset));
  }
}

/** Pops (and acks) with one consumer until every quiet partition was served; answers the pops it took. */
async function popsUntilServed(queue: string, quiet: string[], seen: Map<string, bigint>, limit: number, query = '') {
  const waiting = new Set(quiet);
  let pops = 0;
  while (waiting.size > 0 && pops < limit) {
    const messages = await pop(queue, query);
    pops++;
    checkOrder(seen, messages);
    for (const m of messages) waiting.delete(m.partition);
    await ack(messages, query.match(/consumerGroup=([^&]+)/)?.[1]);
  }
  return { pops, left: waiting.size };
}

describe('fair claim order', () => {
  it('one consumer: 5 quiet partitions pushed after a flood of 5,000 are all served within 6 pops, each partition in order', async () => {
    const queue = uniqueName('fair');
    await push(flood(queue, 'flood', 5_000));
    // The consumer was already draining the flood.
    const seen = new Map<string, bigint>();
    for (let i = 0; i < 3; i++) {
      const m = await pop(queue);
      checkOrder(seen, m);
      await ack(m);
    }
    const quiet = ['q1', 'q2', 'q3', 'q4', 'q5'];
    await push(quiet.map((partition) => ({ queue, partition, payload: partition })));
    const { pops, left } = await popsUntilServed(queue, quiet, seen, 600);
    expect(left).toBe(0);
    expect(pops).toBeLessThanOrEqual(6);
    // The flood goes on in order afterwards.
    for (let i = 0; i < 5; i++) {
      const m = await pop(queue);
      expect(m.map((x) => x.partition)).toEqual(Array(10).fill('flood'));
      checkOrder(seen, m);
      await ack(m);
    }
  }, 60_000);

  it('a named group of a queue fed before it popped, and every flooded partition served in turn (batch 10, one pop per partition)', async () => {
    const queue = uniqueName('fair-group');
    await push([...flood(queue, 'a', 300), ...flood(queue, 'b', 300), ...flood(queue, 'c', 300)]);
    await push([{ queue, partition: 'quiet', payload: 1 }]);
    const seen = new Map<string, bigint>();
    const served: string[] = [];
    for (let i = 0; i < 8; i++) {
      const m = await pop(queue, 'consumerGroup=g1');
      checkOrder(seen, m);
      served.push(m[0]!.partition);
      await ack(m, 'g1');
    }
    // In turn: every partition within its first 4 pops, then again.
    expect(new Set(served.slice(0, 4))).toEqual(new Set(['a', 'b', 'c', 'quiet']));
    expect(new Set(served.slice(4, 7))).toEqual(new Set(['a', 'b', 'c']));
  }, 60_000);

  it("claimOrder 'oldest' keeps the oldest-first order: the quiet partitions wait for the flood", async () => {
    const queue = uniqueName('oldest');
    expect((await configure(queue, { claimOrder: 'oldest' })).options.claimOrder).toBe('oldest');
    await push(flood(queue, 'flood', 200));
    const quiet = ['q1', 'q2', 'q3'];
    await push(quiet.map((partition) => ({ queue, partition, payload: partition })));
    const { pops, left } = await popsUntilServed(queue, quiet, new Map(), 100);
    expect(left).toBe(0);
    // 200 flood messages first, 10 a pop: 20 pops, then one pop per quiet partition.
    expect(pops).toBe(23);
  }, 60_000);

  it('several consumers at once: three consumers: the 5 quiet partitions are all served within 6 pops plus the 2 in flight beside it', async () => {
    const queue = uniqueName('fair-many');
    await push(flood(queue, 'flood', 3_000));
    const quiet = ['q1', 'q2', 'q3', 'q4', 'q5'];
    await push(quiet.map((partition) => ({ queue, partition, payload: partition })));
    const waiting = new Set(quiet);
    const seen = new Map<string, bigint>();
    let pops = 0;
    let popsAtLast = 0;
    const consumer = async () => {
      while (waiting.size > 0 && pops < 600) {
        // Numbered when it starts: a slow answer must not be charged for the pops the others began meanwhile.
        const mine = ++pops;
        const m = await pop(queue);
        checkOrder(seen, m);
        for (const x of m) if (waiting.delete(x.partition) && waiting.size === 0) popsAtLast = mine;
        await ack(m);
      }
    };
    await Promise.all([consumer(), consumer(), consumer()]);
    expect(waiting.size).toBe(0);
    // Three pops in flight at once: the last quiet partition within 6 pops, plus the two others already under way.
    expect(popsAtLast).toBeLessThanOrEqual(8);
  }, 60_000);
});

describe('partition weights', () => {
  /** Messages served per partition over `pops` pops of batch 10 with `consumers` consumers, acked as they come. */
  async function served(queue: string, pops: number, consumers: number) {
    const count = new Map<string, number>();
    let done = 0;
    const consumer = async () => {
      while (done < pops) {
        done++;
        const m = await pop(queue);
        for (const x of m) count.set(x.partition, (count.get(x.partition) ?? 0) + 1);
        await ack(m);
      }
    };
    await Promise.all(Array.from({ length: consumers }, consumer));
    return count;
  }

  it('3:1 by name prefix under contention: 75 % ± 5 % of the messages go to the heavier partition (one consumer)', async () => {
    const queue = uniqueName('weights');
    const echo = await configure(queue, { partitionWeights: { 'tenant-a/': 3, 'tenant-b/': 1 } });
    expect(echo.options.partitionWeights).toEqual({ 'tenant-a/': 3, 'tenant-b/': 1 });
    await push([...flood(queue, 'tenant-a/orders', 1_000), ...flood(queue, 'tenant-b/orders', 1_000)]);
    const count = await served(queue, 80, 1);
    const a = count.get('tenant-a/orders') ?? 0;
    const bb = count.get('tenant-b/orders') ?? 0;
    expect(a + bb).toBe(800);
    expect(a / (a + bb)).toBeGreaterThanOrEqual(0.7);
    expect(a / (a + bb)).toBeLessThanOrEqual(0.8);
  }, 60_000);

  it('3:1 with two consumers over two partitions of each tenant: 75 % ± 5 %', async () => {
    const queue = uniqueName('weights-many');
    await configure(queue, { partitionWeights: { 'a-': 3 } });
    await push([...flood(queue, 'a-1', 1_000), ...flood(queue, 'a-2', 1_000), ...flood(queue, 'b-1', 1_000), ...flood(queue, 'b-2', 1_000)]);
    const count = await served(queue, 160, 2);
    const a = (count.get('a-1') ?? 0) + (count.get('a-2') ?? 0);
    const total = [...count.values()].reduce((x, y) => x + y, 0);
    expect(total).toBeGreaterThan(1_500);
    expect(a / total).toBeGreaterThanOrEqual(0.7);
    expect(a / total).toBeLessThanOrEqual(0.8);
  }, 60_000);

  it('refuses a weight out of range, a bad claimOrder and an unknown option, changing nothing', async () => {
    const queue = uniqueName('bad');
    await configure(queue, { claimOrder: 'oldest' });
    for (const options of [{ partitionWeights: { a: 0 } }, { partitionWeights: { a: 1.5 } }, { claimOrder: 'random' }, { conflatedGroups: [''] }, { conflatedGroups: 'g' }]) {
      const r = await b.http('POST', '/api/v1/configure', { queue, options });
      expect(r.status, JSON.stringify(options)).toBe(400);
      expect(r.body.error?.code ?? r.body.code).toBe('VALIDATION_FAILED');
    }
    expect((await configure(queue, {})).options).toMatchObject({ claimOrder: 'oldest', partitionWeights: {}, conflatedGroups: [] });
  });
});

describe('conflation', () => {
  async function groupLag(group: string, queue: string) {
    const r = await b.http('GET', `/api/v1/consumer-groups/${group}?queue=${queue}`);
    expect(r.status).toBe(200);
    return Object.fromEntries((r.body.partitions as { partition: string; lag: number; cursor: string }[]).map((p) => [p.partition, { lag: p.lag, cursor: p.cursor }]));
  }
  async function listedLag(group: string, queue: string) {
    const r = await b.http('GET', `/api/v1/consumer-groups?search=${group}`);
    expect(r.status).toBe(200);
    return (r.body as { name: string; queues: { queue: string; lag: number }[] }[]).find((g) => g.name === group)!.queues.find((q) => q.queue === queue)!.lag;
  }

  it('a conflated group gets the newest of N messages of each partition; its ack leaves lag 0; another group still gets every message', async () => {
    const queue = uniqueName('conflate');
    const latest = uniqueName('latest');
    const every = uniqueName('every');
    expect((await configure(queue, { conflatedGroups: [latest] })).options.conflatedGroups).toEqual([latest]);
    await push([...flood(queue, 'price-a', 20), ...flood(queue, 'price-b', 7)]);

    const got = await pop(queue, `consumerGroup=${latest}&partitions=10`);
    expect(got.map((m) => [m.partition, (m.data as { i: number }).i]).sort()).toEqual([['price-a', 19], ['price-b', 6]]);
    // Before the ack: the group receives one message of each partition.
    expect(await groupLag(latest, queue)).toEqual({ 'price-a': { lag: 1, cursor: '0' }, 'price-b': { lag: 1, cursor: '0' } });
    expect(await listedLag(latest, queue)).toBe(2);
    await ack(got, latest);
    expect(await groupLag(latest, queue)).toEqual({ 'price-a': { lag: 0, cursor: '20' }, 'price-b': { lag: 0, cursor: '7' } });
    expect(await listedLag(latest, queue)).toBe(0);
    expect(await pop(queue, `consumerGroup=${latest}`)).toEqual([]);

    // Three more on one partition: the newest of those three, once.
    await push(flood(queue, 'price-a', 3));
    const next = await pop(queue, `consumerGroup=${latest}&partitions=10`);
    expect(next.map((m) => [m.partition, m.offset, (m.data as { i: number }).i])).toEqual([['price-a', '23', 2]]);
    await ack(next, latest);
    expect((await groupLag(latest, queue))['price-a']).toEqual({ lag: 0, cursor: '23' });

    // A group the queue does not conflate reads every message, in order.
    const seen = new Map<string, bigint>();
    let n = 0;
    for (let i = 0; i < 5; i++) {
      const m = await pop(queue, `consumerGroup=${every}`);
      checkOrder(seen, m);
      n += m.length;
      await ack(m, every);
    }
    expect(n).toBe(30);
  }, 60_000);

  it('autoAck: a conflated pop consumes everything behind the newest message', async () => {
    const queue = uniqueName('conflate-auto');
    await configure(queue, { conflatedGroups: ['__QUEUE_MODE__'] });
    await push(flood(queue, 'device-1', 12));
    const got = await pop(queue, 'autoAck=true');
    expect(got.map((m) => (m.data as { i: number }).i)).toEqual([11]);
    expect(await pop(queue, 'autoAck=true')).toEqual([]);
    const { rows } = await b.sql.query(
      `select c.cursor_offset::int as c from queen.cursors c join queen.partitions p on p.id = c.partition_id where p.queue_name = $1 and c.consumer_group = '__QUEUE_MODE__'`,
      [queue],
    );
    expect(rows).toEqual([{ c: 12 }]);
  });
});
