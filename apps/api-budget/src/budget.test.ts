import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, sleep, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { runApiBudget } from './budget.js';

// The seed's fixed budget end to end: two keys (source partitions), budget 3,
// five requests each → three admitted per key in order; the rest stay
// pending and deferred across lease expiries, never dead-lettered.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

describe('api-budget worker', () => {
  it('admits exactly the budget per key, in order; the denied tail stays pending, uncharged', async () => {
    const source = uniqueName('api-requests');
    const sink = `${source}.allowed`;
    const queryId = `${source}.budget`;
    await b.http('POST', '/api/v1/configure', { queue: source, options: { leaseTime: 1, retryLimit: 1 } });
    for (const key of ['alice', 'bob']) {
      const res = await b.http('POST', '/api/v1/push', { items: [1, 2, 3, 4, 5].map((n) => ({ queue: source, partition: key, payload: { key, n } })) });
      expect(res.status).toBe(201);
    }
    const errors: Error[] = [];
    const { handle, queen } = await runApiBudget({ url: b.url, source, sink, queryId, budget: 3, batchSize: 10, onError: (e) => errors.push(e) });
    try {
      const admitted = await eventually(async () => {
        const res = await b.sql.query(
          `select m.payload from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1 order by p.name, m.msg_offset`,
          [sink],
        );
        return res.rows.length >= 6 ? res.rows.map((r) => r.payload) : null;
      }, 10000, 100);
      expect(admitted).toEqual([
        ...[1, 2, 3].map((n) => ({ key: 'alice', n })),
        ...[1, 2, 3].map((n) => ({ key: 'bob', n })),
      ]);
      // three lease periods later: nothing more admitted, requests 4 and 5 still pending, no DLQ, no failure charged
      await sleep(3500);
      const { rows: sinkCount } = await b.sql.query(
        'select count(*)::int as n from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1',
        [sink],
      );
      expect(sinkCount[0].n).toBe(6);
      const { rows: cursors } = await b.sql.query(
        `select p.name, c.cursor_offset::int as cursor from queen.cursors c join queen.partitions p on p.id = c.partition_id
          where c.consumer_group = $1 order by p.name`,
        [`streams.${queryId}`],
      );
      expect(cursors).toEqual([{ name: 'alice', cursor: 3 }, { name: 'bob', cursor: 3 }]);
      const { rows: dlq } = await b.sql.query('select count(*)::int as n from queen.dlq where consumer_group = $1', [`streams.${queryId}`]);
      expect(dlq[0].n).toBe(0);
      expect(handle.metrics().gateAllowsTotal).toBe(6);
      expect(handle.metrics().gateDenialsTotal).toBeGreaterThanOrEqual(4); // each key denied at least twice
      expect(errors).toEqual([]);
    } finally {
      await handle.stop();
      await queen.close();
    }
  });
});
