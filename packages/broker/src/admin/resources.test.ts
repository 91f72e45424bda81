import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { groupDetailResponse, queueDetailResponse, queueListResponse, type z } from '@queen-mq/protocol';
import { startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// The resource routes (PROTOCOL §5.10) answer exactly what their protocol
// schemas say: the console and the client type these answers from them.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => {
  await b?.stop();
});

/** The schema accepts the answer and drops nothing from it (its objects strip fields they do not name). */
function matches(schema: z.ZodType, body: unknown): void {
  expect(schema.parse(body)).toEqual(body);
}

describe('resource routes against their schemas', () => {
  it('queue list, queue detail and consumer group detail (a leased partition and one never read)', async () => {
    const queue = uniqueName('res');
    const group = uniqueName('res-g');
    const pushed = await b.http('POST', '/api/v1/push', {
      items: [
        { queue, partition: 'p1', payload: 1 },
        { queue, partition: 'p1', payload: 2 },
        { queue, partition: 'p2', payload: 3 },
      ],
    });
    expect(pushed.status).toBe(201);
    const popped = await b.http('GET', `/api/v1/pop/queue/${queue}/partition/p1?batch=1&consumerGroup=${group}`);
    expect(popped.status).toBe(200);

    const list = await b.http('GET', '/api/v1/resources/queues?limit=1000');
    expect(list.status).toBe(200);
    matches(queueListResponse, list.body);
    expect(list.body.queues.find((q: { name: string }) => q.name === queue)).toMatchObject({ partitions: 2 });

    const detail = await b.http('GET', `/api/v1/resources/queues/${queue}`);
    expect(detail.status).toBe(200);
    matches(queueDetailResponse, detail.body);
    expect(detail.body.partitions.map((p: { name: string; headOffset: string }) => [p.name, p.headOffset])).toEqual([
      ['p1', '2'],
      ['p2', '1'],
    ]);

    // p1 holds a live lease; p2 gets a cursor row without ever being read by the group (a seek).
    const seek = await b.http('POST', `/api/v1/consumer-groups/${group}/queues/${queue}/partitions/p2/seek`, { offset: '0' });
    expect(seek.status).toBe(200);
    const g = await b.http('GET', `/api/v1/consumer-groups/${group}?queue=${queue}`);
    expect(g.status).toBe(200);
    matches(groupDetailResponse, g.body);
    const byPartition = Object.fromEntries(g.body.partitions.map((p: { partition: string }) => [p.partition, p]));
    expect(byPartition.p1).toMatchObject({ leased: true, leaseExpiresAt: expect.any(String), lastConsumedAt: expect.any(String), lag: 2 });
    expect(byPartition.p2).toMatchObject({ leased: false, leaseExpiresAt: null });
  });
});
