import { describe, expect, it } from 'vitest';
import { eventually, uniqueName } from '@queen-mq/testing';
import { stepQuery } from '@queen-mq/core';
import { Stream } from './index.js';
import { collectUntil, configureSource, runDefaults, sleep, useStreamBroker } from '../test/helpers.js';

// `.join()` end to end: two queues, a runner (or two, or one restarted), the
// output queue compared with a model computed here from the messages the
// broker stored, sharing no code with the join's fold.

const env = useStreamBroker();

interface Order {
  id: string;
  t: number;
}
interface Payment {
  id: string;
  orderId: string;
  t: number;
}

/** Stored payloads of a queue, per partition in offset order. */
async function stored<T>(queue: string): Promise<Map<string, T[]>> {
  const { rows } = await env.b.sql.query(
    `select p.name, m.payload from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1 order by p.name, m.msg_offset`,
    [queue],
  );
  const out = new Map<string, T[]>();
  for (const r of rows) out.set(r.name, [...(out.get(r.name) ?? []), r.payload]);
  return out;
}

/** The model: per partition, non-late records (own side's max time − grace), couples within the bound; a left join's expired unmatched orders. */
function expectedPairs(orders: Map<string, Order[]>, payments: Map<string, Payment[]>, withinMs: number, graceMs: number, type: 'inner' | 'left'): string[] {
  const onTime = <T extends { t: number }>(list: T[]) => {
    let max = -Infinity;
    return list.filter((x) => {
      if (x.t < max - graceMs) return false;
      max = Math.max(max, x.t);
      return true;
    });
  };
  const out: string[] = [];
  for (const [partition, list] of orders) {
    const os = onTime(list);
    const ps = onTime(payments.get(partition) ?? []);
    const lastPayment = ps.length ? Math.max(...ps.map((p) => p.t)) : null;
    for (const o of os) {
      const matches = ps.filter((p) => p.orderId === o.id && Math.abs(p.t - o.t) <= withinMs);
      for (const p of matches) out.push(`${partition}:${o.id}+${p.id}`);
      if (type === 'left' && matches.length === 0 && lastPayment !== null && lastPayment - graceMs > o.t + withinMs) out.push(`${partition}:${o.id}+null`);
    }
  }
  return out.sort();
}

function rng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('interval join', () => {
  it('event-time left join over 3 partitions, out of order, with duplicate payments, two runners at once and a restart: each pair and each expired unmatched order once', async () => {
    const orders = uniqueName('orders');
    const payments = uniqueName('payments');
    const sink = uniqueName('paid');
    await configureSource(env.b, orders);
    await configureSource(env.b, payments);
    const rand = rng(42);
    const base = Date.parse('2026-01-05T10:00:00Z');
    const items: { queue: string; partition: string; payload: unknown; transactionId?: string }[] = [];
    for (let p = 0; p < 3; p++) {
      for (let i = 0; i < 40; i++) {
        const t = base + i * 20_000 + Math.floor(rand() * 60_000) - 30_000;
        const id = `o${p}-${i}`;
        items.push({ queue: orders, partition: `p${p}`, payload: { id, t } });
        if (rand() < 0.8) {
          const pay = { id: `pay-${id}`, orderId: id, t: t + Math.floor(rand() * 460_000) - 60_000 };
          items.push({ queue: payments, partition: `p${p}`, payload: pay, transactionId: `tx-${pay.id}` });
          // A duplicate push of the same message (the broker keeps one) and, now and then, a second payment.
          if (rand() < 0.2) items.push({ queue: payments, partition: `p${p}`, payload: pay, transactionId: `tx-${pay.id}` });
          if (rand() < 0.1) items.push({ queue: payments, partition: `p${p}`, payload: { ...pay, id: `${pay.id}-again` } });
        }
      }
    }
    // Both queues interleaved in roughly time order, each record displaced at random by up to ±40 s (beyond the grace: some are late).
    const order = new Map(items.map((it) => [it, (it.payload as { t: number }).t + Math.floor(rand() * 80_000) - 40_000]));
    items.sort((x, y) => order.get(x)! - order.get(y)!);
    // Then close every partition's bounds with a late pair of markers.
    for (let p = 0; p < 3; p++) {
      items.push({ queue: payments, partition: `p${p}`, payload: { id: `end-pay-${p}`, orderId: 'end', t: base + 3_600_000 } });
      items.push({ queue: orders, partition: `p${p}`, payload: { id: `end-${p}`, t: base + 3_600_000 } });
    }

    const chain = Stream.from<Order>(env.queen.queue(orders))
      .join<Payment, { order: string; payment: string | null; partition?: string }>(env.queen.queue(payments), {
        within: { minutes: 5 },
        gracePeriod: 30,
        key: { left: (o) => o.id, right: (p) => p.orderId },
        eventTime: { left: (o) => o.t, right: (p) => p.t },
        type: 'left',
        select: (o, p) => ({ order: o.id, payment: p ? p.id : null }),
      })
      .map((v, ctx) => ({ ...v, partition: ctx.partition }))
      .to(env.queen.queue(sink));
    const queryId = uniqueName('join');
    const errors: string[] = [];
    const onError = (e: Error, i: { phase: string }) => void errors.push(`${i.phase}: ${e.message}`);
    const opts = { ...runDefaults, queryId, url: env.b.url, batchSize: 7, maxWaitMillis: 100, onError };
    let first = env.track(await chain.run(opts));
    const second = env.track(await chain.run(opts));
    for (let i = 0; i < items.length; i += 25) {
      expect((await env.b.http('POST', '/api/v1/push', { items: items.slice(i, i + 25) })).status).toBe(201);
      if (i === 100) {
        // A runner stopped mid-stream and a new one in its place.
        await first.stop();
        first = env.track(await chain.run(opts));
      }
      await sleep(20);
    }
    const expected = expectedPairs(await stored<Order>(orders), await stored<Payment>(payments), 300_000, 30_000, 'left');
    const got = await collectUntil(env.b, sink, (all) => all.length >= expected.length, 90_000, 1500);
    await Promise.all([first.stop(), second.stop()]);
    const pairs = got.map((m) => `${m.data.partition}:${m.data.order}+${m.data.payment}`).sort();
    expect(pairs).toEqual(expected);
    // Some payments came too late or too early for their order, some orders never had one: both kinds of output are here.
    expect(pairs.filter((p) => p.endsWith('+null')).length).toBeGreaterThan(5);
    expect(pairs.filter((p) => !p.endsWith('+null')).length).toBeGreaterThan(60);
    expect(errors.filter((e) => !e.includes('VERSION_CONFLICT'))).toEqual([]);
  });

  it('processing-time inner join: an order and its payment pair once; unrelated keys do not; state holds the unpaired records per side', async () => {
    const orders = uniqueName('orders');
    const payments = uniqueName('payments');
    const sink = uniqueName('paid');
    await configureSource(env.b, orders);
    await configureSource(env.b, payments);
    const queryId = uniqueName('join-pt');
    const h = env.track(
      await Stream.from(env.queen.queue(orders))
        .join(env.queen.queue(payments), { within: { seconds: 300 }, key: { left: (o: any) => o.id, right: (p: any) => p.orderId } })
        .to(env.queen.queue(sink))
        .run({ ...runDefaults, queryId, url: env.b.url }),
    );
    await env.b.http('POST', '/api/v1/push', { items: [{ queue: orders, partition: 'eu', payload: { id: 'a' } }, { queue: orders, partition: 'eu', payload: { id: 'b' } }] });
    await sleep(200);
    await env.b.http('POST', '/api/v1/push', { items: [{ queue: payments, partition: 'eu', payload: { orderId: 'a', amount: 5 } }, { queue: payments, partition: 'eu', payload: { orderId: 'zzz', amount: 1 } }] });
    const got = await collectUntil(env.b, sink, (all) => all.length >= 1, 20_000, 1000);
    expect(got.map((m) => m.data)).toEqual([{ left: { id: 'a' }, right: { orderId: 'a', amount: 5 } }]);
    expect(got[0]!.partition).toBe('eu');
    await eventually(async () => h.metrics().messagesTotal === 4, 10_000);
    const reg = (await env.b.http('GET', `/streams/v1/queries?limit=1000`)).body.queries.find((q: any) => q.name === queryId);
    const { rows } = await env.b.sql.query(`select key, value from queen_streams.state where query_id = $1 order by key`, [reg.query_id]);
    const held = Object.fromEntries(rows.filter((r) => r.key.startsWith('join')).map((r) => [r.key.replace(/\u001f/g, '/'), r.value.records.length]));
    expect(held).toEqual({ 'join/left/a': 1, 'join/left/b': 1, 'join/right/a': 1, 'join/right/zzz': 1 });
    expect(rows.find((r) => r.key === '__join__')!.value.partition).toBe('eu');
    // The live view: the records the join holds per side, by partition name.
    const live = await env.b.http('GET', `/streams/v1/queries/${encodeURIComponent(queryId)}/joins`);
    expect(live.status).toBe(200);
    expect(live.body.total).toBe(1);
    expect(live.body.shards.map((s: any) => [s.partition, s.left.keys, s.left.records, s.right.keys, s.right.records])).toEqual([['eu', 2, 2, 2, 2]]);
    expect(typeof live.body.shards[0].left.watermark).toBe('number');
    expect((await env.b.http('GET', `/streams/v1/queries/${encodeURIComponent(queryId)}/joins?partition=us`)).body).toMatchObject({ total: 0, shards: [] });
  });

  it("processing-time left join, then both queues go quiet: the idle flush emits each unpaid order with a null side once the broker's clock passes its bound, and the state empties", async () => {
    const orders = uniqueName('orders');
    const payments = uniqueName('payments');
    const sink = uniqueName('paid');
    await configureSource(env.b, orders);
    await configureSource(env.b, payments);
    const queryId = uniqueName('join-idle');
    const h = env.track(
      await Stream.from(env.queen.queue(orders))
        .join(env.queen.queue(payments), {
          within: { ms: 300 },
          gracePeriod: 0.2,
          idleFlushMs: 100,
          type: 'left',
          key: { left: (o: any) => o.id, right: (p: any) => p.orderId },
          select: (o: any, p: any) => `${o.id}+${p ? p.orderId : 'null'}`,
        })
        .to(env.queen.queue(sink))
        .run({ ...runDefaults, queryId, url: env.b.url }),
    );
    // 'eu' gets a payment for one of its two orders; the payments queue never gets an 'us' partition at all.
    const pushedAt = Date.now();
    await env.b.http('POST', '/api/v1/push', {
      items: [
        { queue: orders, partition: 'eu', payload: { id: 'a' } },
        { queue: orders, partition: 'eu', payload: { id: 'b' } },
        { queue: orders, partition: 'us', payload: { id: 'c' } },
      ],
    });
    await env.b.http('POST', '/api/v1/push', { items: [{ queue: payments, partition: 'eu', payload: { orderId: 'a' } }] });
    const got = await collectUntil(env.b, sink, (all) => all.length >= 3, 20_000, 1000);
    expect(got.map((m) => `${m.partition}:${m.data}`).sort()).toEqual(['eu:a+a', 'eu:b+null', 'us:c+null']);
    // Not before the orders' bound (within + grace: 500 ms after they were stamped) had passed on the clock.
    expect(Date.now() - pushedAt).toBeGreaterThanOrEqual(450);
    const reg = (await env.b.http('GET', `/streams/v1/queries?limit=1000`)).body.queries.find((q: any) => q.name === queryId);
    await eventually(async () => {
      const { rows } = await env.b.sql.query(`select key from queen_streams.state where query_id = $1`, [reg.query_id]);
      return rows.every((r) => r.key === '__join__');
    }, 5_000);
    expect(h.metrics().flushCyclesTotal).toBeGreaterThanOrEqual(2);
    // No partition was made for the flush's guard on the queue that has none.
    expect((await env.b.sql.query(`select count(*)::int as n from queen.partitions where queue_name = $1 and name = 'us'`, [payments])).rows[0].n).toBe(0);
  });

  it('one cycle commits both sides: the left batch, the right queue\'s pending messages of that partition, both acks', async () => {
    const orders = uniqueName('orders');
    const payments = uniqueName('payments');
    const sink = uniqueName('paid');
    await env.b.http('POST', '/api/v1/push', {
      items: [
        { queue: orders, partition: 'eu', payload: { id: 'a' } },
        { queue: orders, partition: 'eu', payload: { id: 'b' } },
        { queue: payments, partition: 'eu', payload: { orderId: 'b' } },
        { queue: payments, partition: 'eu', payload: { orderId: 'a' } },
      ],
    });
    const chain = Stream.from(env.queen.queue(orders))
      .join(env.queen.queue(payments), { within: { seconds: 300 }, key: { left: (o: any) => o.id, right: (p: any) => p.orderId }, select: (o: any, p: any) => `${o.id}=${p.orderId}` })
      .to(env.queen.queue(sink));
    const run = await stepQuery(chain.core.compile(), { queryId: uniqueName('join-both'), url: env.b.url });
    const commits: number[] = [];
    run.on('cycle:commit', (c: { messages: number }) => void commits.push(c.messages));
    try {
      expect(await run.step()).toBe(2);
      expect(commits).toEqual([4]);
      expect(await run.step()).toBe(0);
    } finally {
      await run.stop();
    }
    const group = run.consumerGroup;
    const { rows } = await env.b.sql.query(
      `select p.queue_name as q, c.cursor_offset::int as c from queen.cursors c join queen.partitions p on p.id = c.partition_id where c.consumer_group = $1 and p.queue_name = any($2) order by 1`,
      [group, [orders, payments]],
    );
    expect(rows.map((r) => [r.q === orders ? 'orders' : 'payments', r.c]).sort()).toEqual([['orders', 2], ['payments', 2]]);
    const got = await collectUntil(env.b, sink, (all) => all.length >= 2, 10_000, 500);
    expect(got.map((m) => m.data).sort()).toEqual(['a=a', 'b=b']);
  });

  it('refuses sides pinned to different partitions (at the call) and two queues with no partition name in common (at run)', async () => {
    const a = env.queen.queue(uniqueName('a'));
    const c = env.queen.queue(uniqueName('c'));
    expect(() => Stream.from(a.partition('x')).join(c, { within: { seconds: 1 }, key: () => 1 })).toThrow(/pin both to the same partition or neither/);
    expect(() => Stream.from(a).join(c, { within: { seconds: 1 }, key: () => 1, typo: 1 } as any)).toThrow(/unknown option "typo"/);
    expect(() => Stream.from(a).map((x) => x).join(c, { within: { seconds: 1 }, key: () => 1 })).toThrow(/must come right after Stream.from/);
    expect(() => Stream.from(a).join(c, { within: { seconds: 1 }, key: () => 1 }).windowTumbling({ seconds: 1 })).toThrow(/cannot follow .join\(\)/);
    await env.b.http('POST', '/api/v1/push', { items: [{ queue: a.name, partition: 'by-customer-1', payload: 1 }, { queue: c.name, partition: 'Default', payload: 1 }] });
    const err = await Stream.from(a)
      .join(c, { within: { seconds: 1 }, key: () => 1 })
      .to(env.queen.queue(uniqueName('s')))
      .run({ queryId: uniqueName('mismatch'), url: env.b.url })
      .catch((e) => e);
    expect(err.code).toBe('VALIDATION_FAILED');
    expect(err.message).toMatch(/not partitioned alike/);
  });
});

describe('a join in the test kit', () => {
  it("testStream's state() shows the held records per side under each partition name, the __join__ row only on request", async () => {
    const { testStream } = await import('@queen-mq/testing');
    const orders = uniqueName('orders');
    const payments = uniqueName('payments');
    const t = await testStream(
      Stream.from(env.queen.queue(orders)).join(env.queen.queue(payments), { within: { seconds: 300 }, key: { left: (o: any) => o.id, right: (p: any) => p.orderId } }).to({ name: uniqueName('paid') }),
    );
    try {
      await t.push([{ id: 'a' }, { id: 'b' }], { partition: 'eu' });
      await t.broker.http('POST', '/api/v1/push', { items: [{ queue: payments, partition: 'eu', payload: { orderId: 'b' } }] });
      const emits = await t.advance(1000);
      expect(emits.map((e) => e.data)).toEqual([{ left: { id: 'b' }, right: { orderId: 'b' } }]);
      const rows = await t.state();
      expect(rows.map((r) => [r.partition, r.key.replace(/\u001f/g, '/'), r.value.records.length])).toEqual([
        ['eu', 'join/left/a', 1],
        ['eu', 'join/left/b', 1],
        ['eu', 'join/right/b', 1],
      ]);
      const all = await t.state({ bookkeeping: true });
      expect(all.map((r) => r.key)).toContain('__join__');
    } finally {
      await t.stop();
    }
  });
});
