import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { collectUntil, configureSource, cursorOf, drain, sleep, sumOf } from '../test/helpers.js';
import { killAllWorkers, killHard, spawnWorker } from '../test/worker-process.js';

// Exactly-once under crashes: the runner lives in a child process that is
// SIGKILLed at random moments (mid-pop, mid-cycle, mid-flush) and restarted.
// Whatever was committed stays committed once; whatever was not comes back
// with its lease and is rebuilt from the same input.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => {
  killAllWorkers();
  await b?.stop();
});

/** Cycles each worker reported committing (stdout `commit <partition> <n>`), by child. */
const commits = new Map<ChildProcess, number>();

function startWorker(env: Record<string, string>): Promise<ChildProcess> {
  const child = spawnWorker('crash-worker.ts', env);
  let err = '';
  child.stderr!.on('data', (d) => {
    err += d;
    if (process.env.EO_DEBUG) process.stderr.write(`[child ${child.pid} err] ${d}`);
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`worker not ready in 30 s: ${err}`)), 30000);
    commits.set(child, 0);
    child.stdout!.on('data', (d: Buffer) => {
      const text = d.toString();
      commits.set(child, commits.get(child)! + (text.match(/^commit /gm)?.length ?? 0));
      if (process.env.EO_DEBUG) process.stderr.write(`[child ${child.pid}] ${text}`);
      if (text.includes('ready ')) {
        clearTimeout(timer);
        resolve(child);
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`worker exited (${code}) before ready: ${err}`));
    });
  });
}

describe('exactly-once', () => {
  it('S48/S50 a runner SIGKILLed at random moments and restarted: every (window, key) emitted once with its exact count', async () => {
    const src = uniqueName('eo-src');
    const sink = uniqueName('eo-sink');
    const queryId = uniqueName('eo');
    await configureSource(b, src);
    const env = { QUEEN_URL: b.url, SRC: src, SINK: sink, QUERY_ID: queryId };

    // 2 partitions × 1500 events, 100 ms apart in event time → 15 windows of 10 s per partition, 3 keys.
    const base = Date.parse('2026-01-05T10:00:00.000Z');
    const perPartition = 1500;
    const partitions = ['pa', 'pb'];
    const expected = new Map<string, { count: number; sum: number }>();
    const batches: { partition: string; items: unknown[] }[] = [];
    for (const partition of partitions) {
      let items: unknown[] = [];
      for (let i = 0; i < perPartition; i++) {
        const ts = base + i * 100;
        const k = `k${i % 3}`;
        const n = i + 1;
        const id = `${partition}|${new Date(Math.floor(ts / 10000) * 10000).toISOString()}|${k}`;
        const e = expected.get(id) ?? { count: 0, sum: 0 };
        e.count += 1;
        e.sum += n;
        expected.set(id, e);
        items.push({ queue: src, partition, payload: { ts, k, n } });
        if (items.length === 250) {
          batches.push({ partition, items });
          items = [];
        }
      }
      // a closer far ahead moves the watermark past every window above; its own window stays open
      items.push({ queue: src, partition, payload: { ts: base + 3_600_000, k: 'closer', n: 0 } });
      batches.push({ partition, items });
    }
    const pushBatch = async (i: number) => {
      const res = await b.http('POST', '/api/v1/push', { items: batches[i]!.items });
      expect(res.status).toBe(201);
    };
    // half before the first runner starts, the rest while runners are being killed
    const order = batches.map((_, i) => i);
    const closers = order.filter((i) => batches[i]!.items.length !== 250);
    const bulk = order.filter((i) => !closers.includes(i));
    const firstHalf = bulk.slice(0, 4);
    const later = [...bulk.slice(firstHalf.length), ...closers];
    for (const i of firstHalf) await pushBatch(i);

    let kills = 0;
    let killedMidRun = 0;
    for (; kills < 6; kills++) {
      if (later.length) await pushBatch(later.shift()!);
      const child = await startWorker(env);
      // let it get going (the previous runner's leases must expire first), then kill at a random moment
      await eventually(async () => commits.get(child)! > 0, 20000, 20);
      await sleep(Math.floor(Math.random() * 600));
      await killHard(child);
      if (commits.get(child)! > 0) killedMidRun += 1;
    }
    while (later.length) await pushBatch(later.shift()!);
    const final = await startWorker(env);

    const total = partitions.length * perPartition;
    const emits = await collectUntil(b, sink, (all) => sumOf(all, 'count') >= total, 90000, 2500);
    await killHard(final);

    expect(kills).toBeGreaterThanOrEqual(5);
    // the kills landed while runners were working, not before their first cycle
    expect(killedMidRun).toBeGreaterThanOrEqual(5);
    expect(sumOf(emits, 'count')).toBe(total);
    const seen = new Map<string, { count: number; sum: number }>();
    for (const m of emits) {
      const [, start] = (m.data.window as string).split('\u001f');
      const id = `${m.partition}|${start}|${m.data.key}`;
      expect(seen.has(id), `emitted twice: ${id}`).toBe(false);
      seen.set(id, { count: m.data.count, sum: m.data.sum });
    }
    expect(new Set(emits.map((m) => m.transactionId)).size).toBe(emits.length);
    expect(Object.fromEntries([...seen].sort())).toEqual(Object.fromEntries([...expected].sort()));
    for (const partition of partitions) expect(await cursorOf(b, `streams.${queryId}`, src, partition)).toBe(String(perPartition + 1));
    const dlq = await b.http('GET', `/api/v1/dlq?queue=${src}`);
    expect(dlq.body.total ?? dlq.body.messages.length).toBe(0);
  }, 150000);

  it('processing time: kills between idle flushes never lose or repeat a window (the flush waits for pending messages)', async () => {
    const src = uniqueName('eop-src');
    const sink = uniqueName('eop-sink');
    const queryId = uniqueName('eop');
    await configureSource(b, src);
    const env = { QUEEN_URL: b.url, SRC: src, SINK: sink, QUERY_ID: queryId, MODE: 'processing' };
    const partitions = ['pa', 'pb'];
    let pushed = 0;
    const pushSome = async () => {
      const items = [];
      for (const partition of partitions) for (let i = 0; i < 150; i++) items.push({ queue: src, partition, payload: { k: `k${i % 3}`, n: pushed + i + 1 } });
      pushed += 150;
      const res = await b.http('POST', '/api/v1/push', { items });
      expect(res.status).toBe(201);
    };
    await pushSome();
    let killedMidRun = 0;
    for (let kills = 0; kills < 5; kills++) {
      await pushSome();
      const child = await startWorker(env);
      await eventually(async () => commits.get(child)! > 0, 20000, 20);
      await sleep(Math.floor(Math.random() * 800));
      await pushSome();
      await killHard(child);
      if (commits.get(child)! > 0) killedMidRun += 1;
    }
    const final = await startWorker(env);
    const total = pushed * partitions.length;
    const emits = await collectUntil(b, sink, (all) => sumOf(all, 'count') >= total, 90000, 2500);
    await killHard(final);

    // Expected windows from the broker's own createdAt of every source message.
    const source = await collectUntil(b, src, (all) => all.length >= total, 30000, 300);
    const expected = new Map<string, number>();
    for (const m of source as any[]) {
      const id = `${m.partition}|${new Date(Math.floor(Date.parse(m.createdAt) / 1000) * 1000).toISOString()}|${m.data.k}`;
      expected.set(id, (expected.get(id) ?? 0) + 1);
    }
    expect(killedMidRun).toBe(5);
    expect(sumOf(emits, 'count')).toBe(total);
    const seen = new Map<string, number>();
    for (const m of emits) {
      const [, start] = (m.data.window as string).split('\u001f');
      const id = `${m.partition}|${start}|${m.data.key}`;
      expect(seen.has(id), `emitted twice: ${id}`).toBe(false);
      seen.set(id, m.data.count);
    }
    expect(new Set(emits.map((m) => m.transactionId)).size).toBe(emits.length);
    expect(Object.fromEntries([...seen].sort())).toEqual(Object.fromEntries([...expected].sort()));
  }, 150000);

  it('late records (onLate: a queue): runners SIGKILLed while late values arrive; every late value reaches the late queue exactly once', async () => {
    const src = uniqueName('eol-src');
    const sink = uniqueName('eol-sink');
    const late = uniqueName('eol-late');
    const queryId = uniqueName('eol');
    await configureSource(b, src);
    const env = { QUEEN_URL: b.url, SRC: src, SINK: sink, QUERY_ID: queryId, LATE: late };
    const base = Date.parse('2026-01-05T10:00:00.000Z');
    const partitions = ['pa', 'pb'];

    // First the watermark: one event an hour ahead per partition, committed before any late value is pushed
    // (a late value in the same batch as it would be judged against the watermark from before the batch).
    const ahead = await b.http('POST', '/api/v1/push', { items: partitions.map((partition) => ({ queue: src, partition, payload: { ts: base + 3_600_000, k: 'ahead', n: 0 } })) });
    expect(ahead.status).toBe(201);
    const first = await startWorker(env);
    await eventually(async () => {
      for (const partition of partitions) if ((await cursorOf(b, `streams.${queryId}`, src, partition)) !== '1') return false;
      return true;
    }, 20000, 50);
    await killHard(first);

    // Then 2 × 600 values of the first ten minutes, all late, pushed 100 at a time while runners are killed.
    const perPartition = 600;
    const batches: unknown[][] = [];
    for (const partition of partitions) {
      for (let i = 0; i < perPartition; i += 100) {
        batches.push(Array.from({ length: 100 }, (_, j) => ({ queue: src, partition, payload: { ts: base + (i + j) * 1000, k: `k${(i + j) % 3}`, n: i + j + 1 } })));
      }
    }
    const pushBatch = async () => {
      const res = await b.http('POST', '/api/v1/push', { items: batches.shift()! });
      expect(res.status).toBe(201);
    };
    await pushBatch();
    await pushBatch();
    let killedMidRun = 0;
    for (let kills = 0; kills < 5; kills++) {
      if (batches.length) await pushBatch();
      const child = await startWorker(env);
      await eventually(async () => commits.get(child)! > 0, 20000, 20);
      await sleep(Math.floor(Math.random() * 400));
      if (batches.length) await pushBatch();
      await killHard(child);
      if (commits.get(child)! > 0) killedMidRun += 1;
    }
    while (batches.length) await pushBatch();
    const final = await startWorker(env);
    const total = partitions.length * perPartition;
    const records = await collectUntil(b, late, (all) => all.length >= total, 90000, 2500);
    await killHard(final);

    expect(killedMidRun).toBe(5);
    expect(records).toHaveLength(total);
    expect(new Set(records.map((m) => m.transactionId)).size).toBe(total);
    // Exactly the pushed values, each once, with its own window and lateness.
    const got = records.map((m) => `${m.partition}|${m.data.offset}|${m.data.value.n}|${m.data.window.start}|${m.data.latenessMs}`).sort();
    const want: string[] = [];
    for (const partition of partitions) {
      for (let i = 0; i < perPartition; i++) {
        const start = base + Math.floor(i / 10) * 10_000;
        want.push(`${partition}|${i + 2}|${i + 1}|${start}|${base + 3_600_000 - (start + 10_000)}`);
      }
    }
    expect(got).toEqual(want.sort());
    for (const r of records) expect(r.data).toMatchObject({ queryId, watermarkMs: base + 3_600_000, key: `k${(r.data.value.n - 1) % 3}`, eventTimeMs: r.data.value.ts });
    // No window result: the only open window is the hour-ahead one.
    expect(await drain(b, sink)).toEqual([]);
    for (const partition of partitions) expect(await cursorOf(b, `streams.${queryId}`, src, partition)).toBe(String(perPartition + 1));
  }, 150000);
});
