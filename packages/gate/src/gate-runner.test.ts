import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Queen } from '@queen-mq/client';
import { Stream, type RunHandle } from '@queen-mq/core';
import { queueSink } from '@queen-mq/sinks';
import { eventually, sleep, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { collectUntil, configureSource, cursorOf, push, stateRows, type SinkMessage } from '../../queen-mq/test/helpers.js';
import { gate, tokenBucket, type GateFn } from './index.js';

// The gate over a real broker (SCENARIOS S41–S47 and the token-bucket
// acceptance run), through core's generic form `.pipe(gate(fn))`; the
// `.gate()` sugar of queen-mq delegates to exactly this.

let b: TestBroker;
let queen: Queen;
let handles: RunHandle[] = [];
beforeAll(async () => {
  b = await startTestBroker();
  queen = new Queen({ url: b.url });
});
afterEach(async () => {
  // every test stops its runners, so S43 can assert that no cycle at all reaches the broker
  await Promise.all(handles.map((h) => h.stop()));
  handles = [];
});
afterAll(async () => {
  await queen?.close();
  await b?.stop();
});

interface Setup {
  src: string;
  sink: string;
  queryId: string;
  group: string;
}

function names(prefix: string): Setup {
  const queryId = uniqueName(prefix);
  return { src: uniqueName(`${prefix}-src`), sink: uniqueName(`${prefix}-sink`), queryId, group: `streams.${queryId}` };
}

async function runGate(s: Setup, fn: GateFn, options: { batchSize?: number; maxPartitions?: number; onError?: (e: Error, info: { phase: string }) => void } = {}) {
  const h = await Stream.from(queen.queue(s.src))
    .pipe(gate(fn))
    .to(queueSink(s.sink))
    .run({ queryId: s.queryId, url: b.url, batchSize: options.batchSize ?? 10, maxPartitions: options.maxPartitions ?? 4, maxWaitMillis: 300, onError: options.onError });
  handles.push(h);
  return h;
}

/** The source cursor row of the query's group: offset and whether a lease is live. */
async function cursorRow(group: string, partitionId: string) {
  const { rows } = await b.sql.query(
    `select cursor_offset::text as cursor, (lease_id is not null and lease_expires_at > now()) as leased
       from queen.cursors where consumer_group = $1 and partition_id = $2`,
    [group, partitionId],
  );
  return rows[0] as { cursor: string; leased: boolean } | undefined;
}

async function cyclesMetric(): Promise<{ declared: boolean; total: number }> {
  const res = await b.http('GET', '/metrics');
  expect(res.status).toBe(200);
  const text = typeof res.body === 'string' ? res.body : String(res.body);
  let total = 0;
  for (const line of text.split('\n')) {
    const m = /^queen_streams_cycles_total(?:\{[^}]*\})? (\S+)$/.exec(line);
    if (m) total += Number(m[1]);
  }
  return { declared: text.includes('# TYPE queen_streams_cycles_total counter'), total };
}

const ns = (msgs: SinkMessage[]) => msgs.map((m) => m.data.data?.n ?? m.data.n);

describe('gate over a real broker', () => {
  it('S41 allow all: sink 1..5 in order, one cycle, lease released, cursor 5', async () => {
    const s = names('s41');
    await configureSource(b, s.src);
    const [p] = await push(b, s.src, [1, 2, 3, 4, 5].map((n) => ({ n })));
    const before = await cyclesMetric();
    const h = await runGate(s, () => true);
    const got = await collectUntil(b, s.sink, (all) => all.length >= 5, 8000, 500);
    expect(ns(got)).toEqual([1, 2, 3, 4, 5]);
    expect(h.metrics().cyclesTotal).toBe(1);
    expect(h.metrics().gateAllowsTotal).toBe(5);
    expect(await cursorRow(s.group, p!.partition_id)).toEqual({ cursor: '5', leased: false });
    // the broker counts the cycle (the series S43 relies on)
    const after = await cyclesMetric();
    expect(after.declared).toBe(true);
    expect(after.total - before.total).toBe(1);
  });

  it('S42 budget deny: sink 1,2,3, row {remaining:0}, cursor 3 still leased; the tail returns in order after expiry', async () => {
    const s = names('s42');
    await configureSource(b, s.src);
    const [p] = await push(b, s.src, Array.from({ length: 10 }, (_, i) => ({ n: i + 1 })));
    const h = await runGate(s, (_req, ctx) => {
      ctx.state.remaining ??= 3;
      if (ctx.state.remaining < 1) return false;
      ctx.state.remaining -= 1;
      return true;
    });
    const got = await collectUntil(b, s.sink, (all) => all.length >= 3, 8000, 600);
    expect(ns(got)).toEqual([1, 2, 3]);
    const rows = await stateRows(b, h.queryUuid, p!.partition_id);
    expect(rows.map((r) => [r.key, r.value])).toEqual([[p!.partition_id, { remaining: 0 }]]);
    const row = await cursorRow(s.group, p!.partition_id);
    expect(row?.cursor).toBe('3');
    expect(h.metrics().gateAllowsTotal).toBe(3);
    expect(h.metrics().gateDenialsTotal).toBeGreaterThanOrEqual(1);
    await h.stop();
    // after expiry a raw pop by the query's group gets n=4 first, then 5..10, uncharged
    const next = await eventually(async () => {
      const res = await b.http('GET', `/api/v1/pop/queue/${s.src}?batch=10&consumerGroup=${s.group}`);
      return res.status === 200 ? res.body.messages : null;
    }, 8000, 200);
    expect(next.map((m: any) => m.data.n)).toEqual([4, 5, 6, 7, 8, 9, 10]);
    expect(next.every((m: any) => m.retryCount === 0)).toBe(true);
  });

  it('S42 the cursor stays leased right after the partial ack', async () => {
    const s = names('s42b');
    await configureSource(b, s.src, { leaseTime: 5 });
    const [p] = await push(b, s.src, [1, 2, 3].map((n) => ({ n })));
    const h = await runGate(s, (v: any) => v.data.n === 1);
    await collectUntil(b, s.sink, (all) => all.length >= 1, 8000);
    const row = await eventually(async () => ((await cursorRow(s.group, p!.partition_id))?.cursor === '1' ? cursorRow(s.group, p!.partition_id) : null), 5000, 100);
    expect(row).toEqual({ cursor: '1', leased: true });
    expect(h.metrics().cyclesTotal).toBe(1);
  });

  it('S43 first message denied: no state, sink empty, cursor 0, queen_streams_cycles_total unchanged, ≥3 denials', async () => {
    const s = names('s43');
    // leaseTime 1 (not the default 2) so three lease periods fit in the 5 s run with room to spare
    await configureSource(b, s.src, { leaseTime: 1 });
    const [p] = await push(b, s.src, [1, 2, 3].map((n) => ({ n })));
    const before = await cyclesMetric();
    expect(before.declared).toBe(true);
    const h = await runGate(s, () => false);
    await sleep(5000);
    expect(h.metrics().cyclesTotal).toBe(0);
    expect(h.metrics().gateDenialsTotal).toBeGreaterThanOrEqual(3);
    expect(await stateRows(b, h.queryUuid, p!.partition_id)).toEqual([]);
    expect(await cursorOf(b, s.group, s.src)).toBe('0');
    expect((await cyclesMetric()).total).toBe(before.total);
    await h.stop();
    const sinkRes = await b.http('GET', `/api/v1/pop/queue/${s.sink}?batch=10&autoAck=true&consumerGroup=check`);
    expect(sinkRes.status === 204 || sinkRes.status === 404).toBe(true);
  });

  it('S44 a deny discards its mutation: state {seen:2}, sink 1, 2', async () => {
    const s = names('s44');
    await configureSource(b, s.src);
    const [p] = await push(b, s.src, [1, 2, 3, 4, 5].map((n) => ({ n })));
    const h = await runGate(s, (v: any, ctx) => {
      ctx.state.seen = (ctx.state.seen ?? 0) + 1;
      return v.data.n <= 2;
    });
    const got = await collectUntil(b, s.sink, (all) => all.length >= 2, 8000, 500);
    expect(ns(got)).toEqual([1, 2]);
    const rows = await stateRows(b, h.queryUuid, p!.partition_id);
    expect(rows.map((r) => r.value)).toEqual([{ seen: 2 }]);
  });

  it('I28.4 a budget written by reassignment limits: ctx.state = {remaining} commits on allow; sink 1,2,3, row {remaining:0}, cursor 3', async () => {
    const s = names('i28-reassign');
    await configureSource(b, s.src);
    const [p] = await push(b, s.src, Array.from({ length: 10 }, (_, i) => ({ n: i + 1 })));
    const h = await runGate(s, (_req, ctx) => {
      const remaining = ctx.state.remaining ?? 3;
      if (remaining < 1) return false;
      ctx.state = { remaining: remaining - 1 };
      return true;
    });
    const got = await collectUntil(b, s.sink, (all) => all.length >= 3, 8000, 600);
    expect(ns(got)).toEqual([1, 2, 3]);
    expect((await stateRows(b, h.queryUuid, p!.partition_id)).map((r) => [r.key, r.value])).toEqual([[p!.partition_id, { remaining: 0 }]]);
    expect((await cursorRow(s.group, p!.partition_id))?.cursor).toBe('3');
    expect(h.metrics().gateAllowsTotal).toBe(3);
  });

  it('I28.4 reassignment: a deny discards it, any JSON value is a row, null/undefined deletes the row', async () => {
    const s = names('i28-rows');
    await configureSource(b, s.src, { leaseTime: 5 });
    const nOf = (v: any) => v.data.n as number;
    const byPartition: Record<string, GateFn> = {
      // every evaluation reassigns; n 3..5 are denied, so their reassignments never happened
      deny: (v, ctx) => {
        ctx.state = { seen: (ctx.state.seen ?? 0) + 1 };
        return nOf(v) <= 2;
      },
      // a number is a row
      number: (_v, ctx) => {
        ctx.state = (typeof ctx.state === 'number' ? ctx.state : 0) + 1;
        return true;
      },
      // n=3 clears the row mid-batch: n=4 starts again from {}
      clear: (v, ctx) => {
        ctx.state = nOf(v) === 3 ? null : { count: (ctx.state.count ?? 0) + 1 };
        return true;
      },
      // a later batch clears a stored row: the row is deleted
      later: (v, ctx) => {
        if (nOf(v) === 3) ctx.state = undefined;
        else ctx.state.count = (ctx.state.count ?? 0) + 1;
        return true;
      },
    };
    const pushed: Record<string, string> = {};
    for (const [partition, count] of [['deny', 5], ['number', 3], ['clear', 4], ['later', 2]] as const) {
      const [p] = await push(b, s.src, Array.from({ length: count }, (_, i) => ({ n: i + 1 })), partition);
      pushed[partition] = p!.partition_id;
    }
    const h = await runGate(s, (v: any, ctx) => byPartition[ctx.partition]!(v, ctx));
    await collectUntil(b, s.sink, (all) => all.length >= 2 + 3 + 4 + 2, 8000, 300);
    const rowsOf = async (partition: string) => (await stateRows(b, h.queryUuid, pushed[partition]!)).map((r) => r.value);
    expect(await rowsOf('deny')).toEqual([{ seen: 2 }]);
    expect((await cursorRow(s.group, pushed.deny!))?.cursor).toBe('2');
    expect(await rowsOf('number')).toEqual([3]);
    expect(await rowsOf('clear')).toEqual([{ count: 1 }]);
    await eventually(async () => (await cursorRow(s.group, pushed.later!))?.cursor === '2' || null, 5000, 100);
    expect(await rowsOf('later')).toEqual([{ count: 2 }]);
    await push(b, s.src, [{ n: 3 }], 'later');
    await eventually(async () => (await cursorRow(s.group, pushed.later!))?.cursor === '3' || null, 8000, 100);
    expect(await rowsOf('later')).toEqual([]);
  });

  it('I28.4 tokenBucket defers by lease by default: out of tokens it denies at once (no wait), the tail stays leased', async () => {
    const s = names('i28-tb-default');
    await configureSource(b, s.src, { leaseTime: 5 });
    const [p] = await push(b, s.src, Array.from({ length: 5 }, (_, i) => ({ n: i + 1 })));
    // The third token is due 500 ms after the burst: a limiter that waited would admit all five in ~1.5 s.
    const h = await runGate(s, tokenBucket({ capacity: 2, refillPerSecond: 2 }));
    const got = await collectUntil(b, s.sink, (all) => all.length >= 2, 8000, 2500);
    expect(ns(got)).toEqual([1, 2]);
    expect(await cursorRow(s.group, p!.partition_id)).toEqual({ cursor: '2', leased: true });
    expect(h.metrics()).toMatchObject({ gateAllowsTotal: 2, gateDenialsTotal: 1 });
  });

  it('S45 deferral is never a failure: retryLimit 1, five denials of n=1, then 1,2,3 and an empty DLQ', async () => {
    const s = names('s45');
    await configureSource(b, s.src, { leaseTime: 1, retryLimit: 1 });
    await push(b, s.src, [1, 2, 3].map((n) => ({ n })));
    let evaluationsOfFirst = 0; // in a closure: a denied ctx.state mutation would be discarded
    const h = await runGate(s, (v: any) => {
      if (v.data.n !== 1) return true;
      evaluationsOfFirst += 1;
      return evaluationsOfFirst > 5;
    });
    const got = await collectUntil(b, s.sink, (all) => all.length >= 3, 20000, 500);
    expect(ns(got)).toEqual([1, 2, 3]);
    expect(evaluationsOfFirst).toBe(6);
    expect(h.metrics().gateDenialsTotal).toBe(5);
    const { rows } = await b.sql.query('select count(*)::int as n from queen.dlq where consumer_group = $1', [s.group]);
    expect(rows[0].n).toBe(0);
    const failures = await b.sql.query('select count(*)::int as n from queen.failures where consumer_group = $1', [s.group]);
    expect(failures.rows[0].n).toBe(0);
  });

  it('S46 order on redelivery: 5 per key per second, 2 partitions × 20 → all 40, n increasing per partition', async () => {
    const s = names('s46');
    await configureSource(b, s.src);
    await push(b, s.src, Array.from({ length: 20 }, (_, i) => ({ n: i + 1 })), 'pa');
    await push(b, s.src, Array.from({ length: 20 }, (_, i) => ({ n: i + 1 })), 'pb');
    const h = await runGate(s, (_v, ctx) => {
      const sec = Math.floor(ctx.streamTimeMs / 1000);
      if (ctx.state.sec !== sec) {
        ctx.state.sec = sec;
        ctx.state.used = 0;
      }
      if (ctx.state.used >= 5) return false;
      ctx.state.used += 1;
      return true;
    }, { batchSize: 50 });
    const got = await collectUntil(b, s.sink, (all) => all.length >= 40, 20000, 800);
    expect(got).toHaveLength(40);
    for (const part of ['pa', 'pb']) {
      const seq = ns(got.filter((m) => m.partition === part));
      expect(seq, part).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    }
    expect(h.metrics().gateAllowsTotal).toBe(40);
    expect(h.metrics().gateDenialsTotal).toBeGreaterThan(0);
  });

  it('S47 gate errors: a throw on n=2, or "yes", is poison: n=1 commits, n=2 is retried to retryLimit then dead-lettered, n=3 commits (issue 13 item 5)', async () => {
    const cases: [string, GateFn][] = [
      ['throw', (v: any, ctx) => {
        ctx.state.count = (ctx.state.count ?? 0) + 1;
        if (v.data.n === 2) throw new Error('boom');
        return true;
      }],
      ['yes', (v: any, ctx) => {
        ctx.state.count = (ctx.state.count ?? 0) + 1;
        return v.data.n === 2 ? ('yes' as any) : true;
      }],
    ];
    for (const [label, fn] of cases) {
      const s = names(`s47-${label}`);
      await configureSource(b, s.src, { retryLimit: 1 });
      const [p] = await push(b, s.src, [1, 2, 3].map((n) => ({ n })));
      const phases: string[] = [];
      const h = await runGate(s, fn, { onError: (_e, info) => phases.push(info.phase) });
      await eventually(async () => (await cursorOf(b, s.group, s.src)) === '3' || null, 8000, 100);
      const sink = await collectUntil(b, s.sink, (all) => all.length >= 2, 5000, 500);
      expect(sink.map((m) => m.data.n), label).toEqual([1, 3]);
      // Two deliveries of n=2 (retryLimit 1), each evaluation's mutation discarded.
      expect(phases, label).toEqual(['gate-eval', 'gate-eval']);
      expect((await stateRows(b, h.queryUuid, p!.partition_id)).map((r) => r.value), label).toEqual([{ count: 2 }]);
      const dlq = await b.http('GET', `/api/v1/dlq?queue=${s.src}`);
      expect(dlq.body.messages.map((m: any) => [m.offset, m.data.n, m.consumerGroup]), label).toEqual([['2', 2, s.group]]);
      expect(h.metrics(), label).toMatchObject({ messagesDeadLetteredTotal: 1, poisonRetriesTotal: 1, messagesTotal: 2, errorsTotal: 2 });
      await h.stop();
    }
  });

  it('token bucket acceptance: 2 tenants × 200, capacity 10, refill 20/s → all 400 in order at 20/s per tenant (±10%)', async () => {
    const s = names('tb');
    await configureSource(b, s.src);
    for (const tenant of ['tenant-a', 'tenant-b']) await push(b, s.src, Array.from({ length: 200 }, (_, i) => ({ tenant, n: i + 1 })), tenant);
    // Waiting inside the operator is the explicit choice that keeps the configured rate (see the README).
    const limiter = tokenBucket({ capacity: 10, refillPerSecond: 20, maxWaitMs: 1000 });
    // two runners of the same query, one partition each per pop: tenants proceed in parallel
    for (let i = 0; i < 2; i++) {
      const h = await Stream.from(queen.queue(s.src))
        .pipe(gate(limiter))
        .map((m: any) => ({ tenant: m.data.tenant, n: m.data.n, admittedAt: Date.now() }))
        .to(queueSink(s.sink))
        .run({ queryId: s.queryId, url: b.url, batchSize: 20, maxPartitions: 1, maxWaitMillis: 300 });
      handles.push(h);
    }
    const got = await collectUntil(b, s.sink, (all) => all.length >= 400, 40000, 800);
    expect(got).toHaveLength(400);
    for (const tenant of ['tenant-a', 'tenant-b']) {
      const mine = got.filter((m) => m.data.tenant === tenant);
      expect(mine.map((m) => m.data.n), tenant).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
      const times = mine.map((m) => m.data.admittedAt as number);
      // the first `capacity` are the burst; the other 190 arrive at the refill rate
      const rate = (200 - 10) / ((times[199]! - times[0]!) / 1000);
      expect(rate, `${tenant} admitted ${rate.toFixed(2)}/s`).toBeGreaterThanOrEqual(18);
      expect(rate, `${tenant} admitted ${rate.toFixed(2)}/s`).toBeLessThanOrEqual(22);
      // and never faster than the bucket allows over any 1-second span
      for (let i = 0; i < times.length; i++) {
        const inSpan = times.filter((t) => t >= times[i]! && t < times[i]! + 1000).length;
        expect(inSpan, tenant).toBeLessThanOrEqual(10 + 20 + 1);
      }
    }
  });
});
