import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { collectUntil, configureSource, cursorOf, sleep, sumOf } from '../test/helpers.js';

// Exactly-once under crashes: the runner lives in a child process that is
// SIGKILLed at random moments (mid-pop, mid-cycle, mid-flush) and restarted.
// Whatever was committed stays committed once; whatever was not comes back
// with its lease and is rebuilt from the same input.

const here = dirname(fileURLToPath(import.meta.url));
const testDir = join(here, '..', 'test');
const tsx = join(here, '..', '..', '..', 'node_modules', '.bin', 'tsx');

let b: TestBroker;
const children = new Set<ChildProcess>();
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  await b?.stop();
});

/** Cycles each worker reported committing (stdout `commit <partition> <n>`), by child. */
const commits = new Map<ChildProcess, number>();

function startWorker(env: Record<string, string>): Promise<ChildProcess> {
  const child = spawn(tsx, ['--tsconfig', join(testDir, 'tsconfig.json'), join(testDir, 'crash-worker.ts')], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  child.on('exit', () => children.delete(child));
  let err = '';
  child.stderr!.on('data', (d) => (err += d));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`worker not ready in 30 s: ${err}`)), 30000);
    commits.set(child, 0);
    child.stdout!.on('data', (d: Buffer) => {
      const text = d.toString();
      commits.set(child, commits.get(child)! + (text.match(/^commit /gm)?.length ?? 0));
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

function killHard(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
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
    const firstHalf = bulk.slice(0, Math.ceil(bulk.length / 2));
    const later = [...bulk.slice(firstHalf.length), ...closers];
    for (const i of firstHalf) await pushBatch(i);

    let kills = 0;
    let killedMidRun = 0;
    for (; kills < 6; kills++) {
      const child = await startWorker(env);
      await sleep(200 + Math.floor(Math.random() * 1300));
      if (later.length) await pushBatch(later.shift()!);
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
    expect(killedMidRun).toBeGreaterThanOrEqual(3);
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
  });
});
