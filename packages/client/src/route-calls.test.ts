import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allRoutes, routePath as protocolRoutePath, transactionAckResult, transactionPushResult } from '@queen-mq/protocol';
import { startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { Queen, QueenError, routePath, routeTable } from './index.js';

// Typed route calls (queen.api.<route>): derived from the protocol's route
// table, so the client never writes a URL; over a real broker.

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

describe('typed route calls', () => {
  it('there is a call for every route the broker serves (the whole table, streams, admin, kv and console included)', () => {
    expect(Object.keys(routeTable).sort()).toEqual(Object.keys(allRoutes).sort());
    for (const name of Object.keys(allRoutes)) expect(typeof (queen.api as Record<string, unknown>)[name], name).toBe('function');
  });

  it('path params are filled in from the table, each URL-encoded; a missing one throws before any request', () => {
    expect(routePath(routeTable.seekPartition, { group: 'g/1', queue: 'q 1', partition: 'p?' })).toBe('/api/v1/consumer-groups/g%2F1/queues/q%201/partitions/p%3F/seek');
    expect(routePath(routeTable.push, undefined)).toBe('/api/v1/push');
    expect(() => routePath(routeTable.queueGet, {})).toThrow(/path parameter "queue" is required/);
    expect(() => routePath(routeTable.queueGet, { queue: '' })).toThrow(/path parameter "queue" is required/);
    // One builder of route URLs: the client's is the protocol's (the console's too).
    expect(routePath).toBe(protocolRoutePath);
  });

  it('queue routes: push, pop by queue and by partition, queue detail, consumer group detail', async () => {
    const queue = uniqueName('routes');
    const pushed = await queen.api.push({ body: { items: [{ queue, partition: 'p1', payload: { n: 1 } }, { queue, partition: 'p2', payload: { n: 2 } }] } });
    expect(pushed.map((r) => r.status)).toEqual(['queued', 'queued']);
    const byPartition = await queen.api.popPartition({ params: { queue, partition: 'p2' }, query: { batch: 10, consumerGroup: 'g' } });
    expect(byPartition!.messages.map((m) => m.data)).toEqual([{ n: 2 }]);
    const byQueue = await queen.api.popQueue({ params: { queue }, query: { batch: 10, consumerGroup: 'g' } });
    expect(byQueue!.messages.map((m) => m.data)).toEqual([{ n: 1 }]);
    const detail = (await queen.api.queueGet({ params: { queue } })) as { partitions: { name: string }[] };
    expect(detail.partitions.map((p) => p.name).sort()).toEqual(['p1', 'p2']);
    const group = (await queen.api.groupGet({ params: { group: 'g' }, query: { queue } })) as { partitions: unknown[] };
    expect(group.partitions).toHaveLength(2);
  });

  it('streams and admin routes; a refusal rejects with the catalogue code', async () => {
    const name = uniqueName('routes-q');
    const reg = await queen.api.streamsRegister({ body: { name, source_queue: uniqueName('routes-src'), config_hash: 'a'.repeat(64) } });
    expect(reg).toMatchObject({ success: true, name, fresh: true });
    const rows = await queen.api.streamsStateGet({ body: { query_id: reg.query_id, partition_id: randomUUID() } });
    expect(rows).toMatchObject({ success: true, rows: [], next_after: null });
    const list = await queen.api.streamsList({ query: { limit: 1000 } });
    expect(list.queries.some((q) => q.name === name)).toBe(true);
    const dropped = await queen.api.streamsDrop({ body: { name } });
    expect(dropped).toMatchObject({ success: true, name });
    expect(await queen.api.maintenanceGet()).toMatchObject({ popMaintenanceMode: false });
    const err = await queen.api.queueGet({ params: { queue: uniqueName('missing') } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(QueenError);
    expect((err as QueenError).code).toBe('QUEUE_NOT_FOUND');
    expect(await queen.api.health()).toMatchObject({ status: expect.any(String) });
    // The broker's clock from GET /health's Date header (whole seconds, never ahead of the broker).
    const date = await queen.brokerDate();
    expect(date! % 1000).toBe(0);
    expect(Math.abs(date! - Date.now())).toBeLessThan(5000);
  });

  it("a transaction's answer matches the protocol's result schemas the client types come from", async () => {
    const queue = uniqueName('routes-tx');
    await queen.queue(queue).push({ n: 1 });
    const popped = (await queen.queue(queue).pop({ batch: 1 }))!.messages;
    const res = await queen.transaction().push(queue, [{ n: 2 }]).ack(popped).commit();
    expect(res.results).toHaveLength(2);
    expect(transactionPushResult.parse(res.results.find((r) => r.type === 'push'))).toMatchObject({ status: 'queued', queueName: queue });
    expect(transactionAckResult.parse(res.results.find((r) => r.type === 'ack'))).toMatchObject({ success: true, dlq: false });
  });
});
