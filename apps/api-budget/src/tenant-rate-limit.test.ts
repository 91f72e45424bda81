import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { Queen } from 'queen-mq';
import { runTenantRateLimit, submitRequest } from './tenant-rate-limit.js';

// Per-tenant token bucket end to end: two tenants × 40 requests, burst 5,
// 10/s each → every request admitted, in order per tenant, no faster than
// the bucket allows and not much slower.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

describe('tenant-rate-limit worker', () => {
  it('admits every request of every tenant in order at the configured rate', async () => {
    const source = uniqueName('by-tenant');
    const sink = `${source}.admitted`;
    const queryId = `${source}.limit`;
    await b.http('POST', '/api/v1/configure', { queue: source, options: { leaseTime: 2 } });
    const producer = new Queen({ url: b.url });
    for (let n = 1; n <= 40; n++) for (const tenant of ['acme', 'globex']) await submitRequest(producer, tenant, { tenant, n }, source);
    await producer.close();
    const errors: Error[] = [];
    // two copies of the worker: one tenant each at a time, so tenants proceed in parallel
    const workers = await Promise.all(
      [0, 1].map(() => runTenantRateLimit({ url: b.url, source, sink, queryId, capacity: 5, refillPerSecond: 10, batchSize: 10, maxPartitions: 1, onError: (e) => errors.push(e) })),
    );
    const started = Date.now();
    try {
      const rows = await eventually(async () => {
        const res = await b.sql.query(
          `select p.name as tenant, m.payload, (extract(epoch from m.created_at) * 1000)::float8 as at
             from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1 order by p.name, m.msg_offset`,
          [sink],
        );
        return res.rows.length >= 80 ? res.rows : null;
      }, 30000, 200);
      expect(rows).toHaveLength(80);
      for (const tenant of ['acme', 'globex']) {
        const mine = rows.filter((r) => r.tenant === tenant);
        expect(mine.map((r) => r.payload.n)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
        // 5 at once, 35 more at 10/s: the last commit cannot come before ~3.5 s
        const span = Math.max(...mine.map((r) => r.at)) - started;
        expect(span, tenant).toBeGreaterThanOrEqual(3000);
        expect(span, tenant).toBeLessThanOrEqual(9000);
      }
      expect(errors).toEqual([]);
    } finally {
      await Promise.all(workers.map(async ({ handle, queen }) => {
        await handle.stop();
        await queen.close();
      }));
    }
  });
});
