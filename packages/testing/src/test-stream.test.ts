import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// queen-mq is resolved by the workspace alias (vitest.config.ts), not a package
// dependency: queen-mq's own tests depend on this package.
import { Stream } from 'queen-mq';
import { startTestBroker, uniqueName, type TestBroker } from './harness.js';
import { testStream } from './test-stream.js';

// The test kit's driver: real cycles against a real broker on a virtual clock.

const SEP = '\u001f';
let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker({ virtualClock: '2026-01-05T10:00:00.000Z' });
});
afterAll(async () => b?.stop());

const data = (emits: { data: unknown }[]) => emits.map((e) => e.data);
const withBounds = (agg: object, ctx: { windowStart?: number; windowEnd?: number }) => ({
  ...agg,
  start: new Date(ctx.windowStart!).toISOString(),
  end: new Date(ctx.windowEnd!).toISOString(),
});

describe('testStream', () => {
  it('processing time: a tumbling minute opens at the push, the idle flush closes it when the clock reaches its end', async () => {
    const src = uniqueName('orders');
    const t = await testStream(
      Stream.from({ name: src })
        .filter((m) => m.data.amount > 0)
        .windowTumbling({ seconds: 60 })
        .aggregate({ count: () => 1, sum: (o) => o.amount })
        .map(withBounds)
        .to({ name: `${src}.per_minute` }),
      { broker: b },
    );
    try {
      const t0 = t.now();
      expect(new Date(t0).toISOString()).toBe('2026-01-05T10:00:00.000Z');
      expect(await t.push([{ amount: 10 }, { amount: -5 }, { amount: 20 }])).toEqual([]);
      expect(await t.advance(59_999)).toEqual([]);
      expect(await t.push([{ amount: 5 }])).toEqual([]); // 10:00:59.999, same window
      const rows = await t.state();
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({ partition: 'Default', key: `tumb:60${SEP}2026-01-05T10:00:00.000Z${SEP}${rows[0]!.partitionId}` });
      expect(rows[0]!.value).toEqual({ acc: { count: 3, sum: 35 }, windowStart: t0, windowEnd: t0 + 60_000 });
      const closed = await t.advance(1);
      expect(data(closed)).toEqual([{ count: 3, sum: 35, start: '2026-01-05T10:00:00.000Z', end: '2026-01-05T10:01:00.000Z' }]);
      expect(closed[0]!.createdAt).toBe('2026-01-05T10:01:00.000Z');
      expect(closed[0]!.transactionId).toMatch(/^sx-[0-9a-f]{40}$/);
      // No window row left; the close horizon remembers what was emitted (a value for it read later is late).
      expect(await t.state()).toEqual([]);
      expect((await t.state({ bookkeeping: true })).map((r) => [r.key, r.value])).toEqual([[`tumb:60${SEP}__closed__`, { closedThroughMs: t0 + 60_000 }]]);
      expect(t.metrics()).toMatchObject({ messagesTotal: 4, flushCyclesTotal: 1 });
      expect(t.errors).toEqual([]);
    } finally {
      await t.stop();
    }
    expect(b.clock!.now()).toBe(Date.parse('2026-01-05T10:01:00.000Z'));
  });

  it('idleFlushMs 0: advancing closes nothing, the next message closes the window in its own cycle', async () => {
    const src = uniqueName('quiet');
    const t = await testStream(Stream.from({ name: src }).windowTumbling({ seconds: 10, idleFlushMs: 0 }).aggregate({ count: () => 1 }).map(withBounds).to({ name: `${src}.out` }), {
      broker: b,
    });
    try {
      const start = t.now(); // 10:01:00, a multiple of 10 s
      await t.push([1, 2], { partition: 'p1' });
      expect(await t.advance(30_000)).toEqual([]);
      expect(await t.flush()).toEqual([]);
      const emits = await t.push([3], { partition: 'p1' });
      expect(emits.map((e) => [e.partition, e.data])).toEqual([['p1', { count: 2, start: new Date(start).toISOString(), end: new Date(start + 10_000).toISOString() }]]);
      expect((await t.state()).filter((r) => !r.key.endsWith(`${SEP}__closed__`)).map((r) => r.value.acc)).toEqual([{ count: 1 }]);
    } finally {
      await t.stop();
    }
  });

  it('a gate-denied tail stays leased until the clock passes its lease, then the gate sees the new time', async () => {
    const src = uniqueName('admit');
    await b.http('POST', '/api/v1/configure', { queue: src, options: { leaseTime: 30 } });
    const t = await testStream(
      // two per minute of broker time
      Stream.from({ name: src })
        .gate((_m, ctx) => {
          const minute = Math.floor(ctx.streamTimeMs / 60_000);
          if (ctx.state.minute !== minute) Object.assign(ctx.state, { minute, used: 0 });
          if (ctx.state.used >= 2) return false;
          ctx.state.used += 1;
          return true;
        })
        .map((m) => m.data)
        .to({ name: `${src}.admitted` }),
      { broker: b },
    );
    try {
      expect(data(await t.push(['a', 'b', 'c', 'd']))).toEqual(['a', 'b']);
      expect(await t.advance(29_000)).toEqual([]); // lease still held: c and d wait
      expect(data(await t.advance(1_000))).toEqual(['c', 'd']); // 30 s on, the next minute of the gate
      expect(t.metrics().gateDenialsTotal).toBe(1);
      const [row] = await t.state();
      expect(row!.value).toEqual({ minute: Math.floor(t.now() / 60_000), used: 2 });
    } finally {
      await t.stop();
    }
  });

  it('a map that keeps throwing: the message is dead-lettered after retryLimit, the others are emitted once', async () => {
    const src = uniqueName('poison');
    const t = await testStream(
      Stream.from({ name: src })
        .map((m) => {
          if (m.data === 3) throw new Error('cannot parse 3');
          return m.data * 10;
        })
        .to({ name: `${src}.out` }),
      { broker: b, source: { retryLimit: 1, leaseTime: 10 } },
    );
    try {
      // The dead-lettering ack ends the lease: 4 follows at once, not when the lease expires.
      const first = await t.push([1, 2, 3, 4]);
      expect(data(first)).toEqual([10, 20, 40]);
      expect(await t.advance(10_000)).toEqual([]);
      expect(data(t.emits())).toEqual([10, 20, 40]);
      const dlq = await t.deadLetters();
      expect(dlq).toHaveLength(1);
      expect(dlq[0]).toMatchObject({ data: 3, offset: '3', retryCount: 2, partition: 'Default' });
      expect(dlq[0]!.errorMessage).toContain('cannot parse 3');
      expect(t.metrics()).toMatchObject({ messagesDeadLetteredTotal: 1, poisonRetriesTotal: 1 });
      expect(t.errors.map((e) => e.info.phase)).toEqual(['operator', 'operator']);
    } finally {
      await t.stop();
    }
  });

  it('a post-window map that throws on one window: that emit is dead-lettered (deadEmits), the next windows are emitted', async () => {
    const src = uniqueName('deademit');
    const t = await testStream(
      Stream.from({ name: src })
        .windowTumbling({ seconds: 60, eventTime: (m) => m.data.ts })
        .aggregate({ count: () => 1 })
        .map((w) => {
          if (w.count === 2) throw new Error('two');
          return w.count;
        })
        .to({ name: `${src}.out` }),
      { broker: b },
    );
    try {
      await t.push([{ ts: '2020-01-01T00:00:10Z' }, { ts: '2020-01-01T00:00:50Z' }, { ts: '2020-01-01T00:01:10Z' }, { ts: '2020-01-01T00:02:10Z' }]);
      expect(data(t.emits())).toEqual([1]);
      const dead = await t.deadEmits();
      expect(dead).toHaveLength(1);
      expect(dead[0]).toMatchObject({
        queryId: t.queryId,
        stage: 'map',
        error: '.map() threw: two',
        value: { count: 2 },
        window: { start: Date.parse('2020-01-01T00:00:00Z'), end: Date.parse('2020-01-01T00:01:00Z') },
      });
      expect(t.metrics().emitsDeadLetteredTotal).toBe(1);
    } finally {
      await t.stop();
    }
  });

  it('event time: windows close on the watermark, and advancing the clock does not move it', async () => {
    const src = uniqueName('events');
    const t = await testStream(
      Stream.from({ name: src })
        .windowTumbling({ seconds: 60, eventTime: (m) => m.data.ts })
        .aggregate({ count: () => 1 })
        .map(withBounds)
        .to({ name: `${src}.out` }),
      { broker: b },
    );
    try {
      expect(await t.push([{ ts: '2020-01-01T00:00:10Z' }, { ts: '2020-01-01T00:00:50Z' }])).toEqual([]);
      expect(await t.advance(3_600_000)).toEqual([]);
      expect(data(await t.push([{ ts: '2020-01-01T00:01:00Z' }]))).toEqual([{ count: 2, start: '2020-01-01T00:00:00.000Z', end: '2020-01-01T00:01:00.000Z' }]);
      expect((await t.state({ bookkeeping: true })).map((r) => r.key.split(SEP)[0])).toEqual(['__wm__', 'tumb:60']);
      expect((await t.state()).map((r) => r.key.split(SEP)[0])).toEqual(['tumb:60']);
    } finally {
      await t.stop();
    }
  });

  it('refuses a broker without a virtual clock', async () => {
    const real = await startTestBroker();
    try {
      await expect(testStream(Stream.from({ name: 'x' }).map((m) => m).to({ name: 'y' }), { broker: real })).rejects.toThrow(/virtualClock/);
    } finally {
      await real.stop();
    }
  });
});

describe('outside the vitest globalSetup', () => {
  it('startTestBroker and testStream in a plain node program start an embedded PostgreSQL of their own and stop it', async () => {
    // The built packages, as a user's program imports them; no DATABASE_URL, no vitest.
    const program = `
import { startTestBroker, testStream } from '@queen-mq/testing';
import { Stream } from 'queen-mq';
const t = await testStream(Stream.from({ name: 'orders' }).windowTumbling({ seconds: 60 }).aggregate({ n: () => 1 }).to({ name: 'out' }));
await t.push([1, 2, 3]);
const emits = await t.advance(60_000);
const cluster = t.broker.cluster;
await t.stop();
console.log(JSON.stringify({ cluster, emits: emits.map((e) => e.data) }));
`;
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !['DATABASE_URL', 'QUEEN_DATABASE_URL', 'VITEST', 'VITEST_WORKER_ID', 'VITEST_POOL_ID'].includes(k)));
    const repo = fileURLToPath(new URL('../../..', import.meta.url));
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', program], { cwd: repo, env, timeout: 120_000 });
    expect(JSON.parse(stdout.trim().split('\n').at(-1)!)).toEqual({ cluster: 'embedded', emits: [{ n: 3 }] });
  }, 150_000);
});
