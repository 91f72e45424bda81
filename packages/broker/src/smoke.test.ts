import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestBroker, type TestBroker } from '@queen-mq/testing';

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

it('smoke push pop ack', async () => {
  const push = await b.http('POST', '/api/v1/push', { items: [{ queue: 'smoke', partition: 'p1', payload: { a: 1 } }] });
  expect(push.status).toBe(201);
  expect(push.body[0]).toMatchObject({ index: 0, status: 'queued', offset: '1', queueName: 'smoke' });
  const pop = await b.http('GET', '/api/v1/pop/queue/smoke?batch=10');
  expect(pop.status).toBe(200);
  expect(pop.body.messages[0]).toMatchObject({ offset: '1', retryCount: 0, data: { a: 1 } });
  const ack = await b.http('POST', '/api/v1/ack', { transactionId: pop.body.messages[0].transactionId, partitionId: pop.body.partitionId, leaseId: pop.body.leaseId });
  expect(ack.body[0]).toMatchObject({ success: true, leaseReleased: true });
});
