import { createHash } from 'node:crypto';
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, sleep, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { runOrdersPerMinute } from './orders-per-minute.js';

// The seed example end to end: a real broker, the worker in this process with
// 1-second windows, orders pushed in bursts, exact totals per window on the sink.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

async function readAll(queue: string, group: string) {
  const out: any[] = [];
  let empty = 0;
  while (empty < 2) {
    const res = await b.http('GET', `/api/v1/pop/queue/${queue}?batch=500&wait=true&timeout=300&autoAck=true&consumerGroup=${group}`);
    if (res.status === 204) empty += 1;
    else {
      empty = 0;
      out.push(...res.body.messages);
    }
  }
  return out;
}

describe('orders-per-minute worker', () => {
  it('emits exactly one {count, sum} per closed window, positive amounts only', async () => {
    const source = uniqueName('orders');
    const sink = `${source}.per_minute`;
    await b.http('POST', '/api/v1/configure', { queue: source, options: { leaseTime: 5 } });
    const errors: Error[] = [];
    const { handle, queen } = await runOrdersPerMinute({ url: b.url, source, sink, queryId: `${source}.q`, seconds: 1, idleFlushMs: 300, onError: (e) => errors.push(e) });
    try {
      // three bursts over ~2.5 s: several windows, some orders filtered out (amount ≤ 0)
      const bursts = [
        [10, 20, -5, 30],
        [1, 0, 2, 3, 4],
        [100, 200],
      ];
      for (const [i, amounts] of bursts.entries()) {
        const res = await b.http('POST', '/api/v1/push', { items: amounts.map((amount) => ({ queue: source, payload: { amount } })) });
        expect(res.status).toBe(201);
        if (i < bursts.length - 1) await sleep(1100);
      }

      // Expected totals from the broker's own createdAt of each order (processing time).
      const orders = await readAll(source, 'expectations');
      expect(orders).toHaveLength(11);
      const pid = orders[0].partitionId as string;
      const expected = new Map<number, { count: number; sum: number }>();
      for (const o of orders) {
        if (!(o.data.amount > 0)) continue;
        const start = Math.floor(Date.parse(o.createdAt) / 1000) * 1000;
        const e = expected.get(start) ?? { count: 0, sum: 0 };
        e.count += 1;
        e.sum += o.data.amount;
        expected.set(start, e);
      }
      expect(expected.size).toBeGreaterThanOrEqual(2);

      // Every window closes: the last ones by the idle flush.
      const deadline = Date.now() + 10000;
      let emitted: any[] = [];
      while (Date.now() < deadline) {
        emitted = await readAll(sink, `check-${Date.now()}`);
        if (emitted.reduce((s, m) => s + m.data.count, 0) >= 9) break;
        await sleep(200);
      }
      await sleep(800);
      emitted = await readAll(sink, 'final');

      // Each window's emit is identified by its deterministic transactionId (PROTOCOL §7.6).
      const txOf = (start: number) =>
        'sx-' + createHash('sha256').update([handle.queryUuid, pid, `tumb:1\u001f${new Date(start).toISOString()}\u001f${pid}`, '0'].join('\u001f')).digest('hex').slice(0, 40);
      const byTx = new Map(emitted.map((m) => [m.transactionId, m.data]));
      expect(emitted).toHaveLength(expected.size);
      for (const [start, totals] of expected) expect(byTx.get(txOf(start)), new Date(start).toISOString()).toEqual(totals);
      expect(emitted.every((m) => m.partition === 'Default')).toBe(true);
      expect(handle.metrics().messagesTotal).toBe(11);
      expect(handle.metrics().flushCyclesTotal).toBeGreaterThanOrEqual(1);
      expect(errors).toEqual([]);
    } finally {
      await handle.stop();
      await queen.close();
    }
  });

  it('main.ts (the seed example as written) runs against QUEEN_URL, folds orders into the open window, stops on SIGTERM', async () => {
    const here = dirname(fileURLToPath(import.meta.url));
    const child = spawn(process.execPath, ['--import', 'tsx', join(here, 'main.ts')], {
      cwd: join(here, '..', '..', '..'),
      env: { ...process.env, QUEEN_URL: b.url, TSX_TSCONFIG_PATH: join(here, '..', 'test', 'tsconfig.json') },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      const queryUuid = await eventually(async () => /query ([0-9a-f-]{36})/.exec(out)?.[1], 30000, 100).catch((e) => {
        throw new Error(`${e.message}; stderr: ${err}`);
      });
      const res = await b.http('POST', '/api/v1/push', { items: [5, -1, 7].map((amount) => ({ queue: 'orders', payload: { amount } })) });
      expect(res.status).toBe(201);
      const pid = res.body[0].partition_id;
      // the 60-second window stays open: its state row holds the positive orders (or, if the minute
      // ended meanwhile, the idle flush already moved the same totals to the sink)
      const totals = await eventually(async () => {
        const r = await b.http('POST', '/streams/v1/state/get', { query_id: queryUuid, partition_id: pid });
        if (r.body.rows?.length) {
          expect(r.body.rows).toHaveLength(1);
          expect(r.body.rows[0].key).toMatch(/^tumb:60\u001f/);
          return r.body.rows[0].value.acc;
        }
        const sink = await b.http('GET', '/api/v1/pop/queue/orders.per_minute?batch=10&autoAck=true&consumerGroup=check');
        return sink.status === 200 ? sink.body.messages[0].data : null;
      }, 10000, 100);
      expect(totals).toEqual({ count: 2, sum: 12 });
    } finally {
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    }
  });
});
