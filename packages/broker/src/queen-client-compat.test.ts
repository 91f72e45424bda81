import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// Queen-client compatibility (PROTOCOL §1.1 "null means
// absent"): the bodies and query strings Queen v1's own clients send
// (client-js src/Queen.ts ack(), TransactionBuilder, QueueBuilder.create()
// and pop(), client-py ack()), which fill every field they do not set with
// null. Each must succeed with the effect it has on Queen, over real HTTP.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

/** Queen's HttpClient: Content-Type application/json on every request, bodies as JSON. */
const post = (path: string, body: unknown) => b.http('POST', path, body);

async function pushN(queue: string, n: number) {
  const items = Array.from({ length: n }, (_, i) => ({ queue, partition: 'Default', payload: { i }, transactionId: `${queue}-${i}` }));
  expect((await post('/api/v1/push', { items })).status).toBe(201);
}

/** Queen's pop(): batch, wait, timeout always; the rest only when set. */
const pop = (queue: string, extra = '') => b.http('GET', `/api/v1/pop/queue/${queue}?batch=10&wait=false&timeout=30000${extra}`);

async function cursor(queue: string, group = '__QUEUE_MODE__') {
  const { rows } = await b.sql.query(
    `select c.cursor_offset::text as acked, c.lease_id is not null as leased
       from queen.cursors c join queen.partitions p on p.id = c.partition_id
      where p.queue_name = $1 and c.consumer_group = $2`,
    [queue, group],
  );
  return rows[0] as { acked: string; leased: boolean } | undefined;
}

describe('Queen client bodies', () => {
  it('configure as QueueBuilder.create() sends it: namespace and task null, every option given; and options null', async () => {
    const queue = uniqueName('cfg');
    const create = await post('/api/v1/configure', {
      queue,
      namespace: null,
      task: null,
      options: { leaseTime: 120, retryLimit: 2, priority: 0, delayedProcessing: 0, windowBuffer: 0, maxSize: 0, retentionSeconds: 0, completedRetentionSeconds: 0, encryptionEnabled: false },
    });
    expect(create.status).toBe(200);
    expect(create.body).toMatchObject({ configured: true, queue, options: { leaseTime: 120, retryLimit: 2 } });
    // options: null is "no options given": everything stays as configured.
    const again = await post('/api/v1/configure', { queue, namespace: null, task: null, options: null });
    expect(again.status).toBe(200);
    expect(again.body.options).toMatchObject({ leaseTime: 120, retryLimit: 2 });
  });

  it('push items with null optional fields: the default partition, a generated transactionId, no trace', async () => {
    const queue = uniqueName('push');
    const r = await post('/api/v1/push', { items: [{ queue, partition: null, payload: { a: null }, transactionId: null, traceId: null }] });
    expect(r.status).toBe(201);
    expect(r.body[0]).toMatchObject({ status: 'queued', queueName: queue, offset: '1', transaction_id: expect.stringMatching(/^[0-9a-f-]{36}$/) });
    const got = await pop(queue);
    expect(got.body.messages[0]).toMatchObject({ partition: 'Default', data: { a: null }, traceId: null });
  });

  it('single ack as Queen.ack() sends it: error null, consumerGroup null → the queue-mode cursor moves', async () => {
    const queue = uniqueName('ack1');
    await pushN(queue, 1);
    const m = (await pop(queue)).body.messages[0];
    const r = await post('/api/v1/ack', { transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status: 'completed', error: null, consumerGroup: null });
    expect(r.status).toBe(200);
    expect(r.body[0]).toMatchObject({ success: true, transactionId: m.transactionId, leaseReleased: true });
    expect(await cursor(queue)).toEqual({ acked: '1', leased: false });
  });

  it('batch ack with nulls, for a named group and for queue mode (consumerGroup null)', async () => {
    const queue = uniqueName('ackb');
    await pushN(queue, 3);
    const msgs = (await pop(queue, '&consumerGroup=workers')).body.messages;
    expect(msgs).toHaveLength(3);
    const acknowledgments = msgs.map((m: any) => ({ transactionId: m.transactionId, partitionId: m.partitionId, status: 'completed', error: null, leaseId: m.leaseId }));
    const named = await post('/api/v1/ack/batch', { acknowledgments, consumerGroup: 'workers' });
    expect(named.status).toBe(200);
    expect(named.body.map((x: any) => x.success)).toEqual([true, true, true]);
    expect(await cursor(queue, 'workers')).toEqual({ acked: '3', leased: false });

    const qm = (await pop(queue)).body.messages;
    const plain = await post('/api/v1/ack/batch', {
      acknowledgments: qm.map((m: any) => ({ transactionId: m.transactionId, partitionId: m.partitionId, status: 'completed', error: null, leaseId: null })),
      consumerGroup: null,
    });
    expect(plain.status).toBe(200);
    expect(plain.body.every((x: any) => x.success)).toBe(true);
    expect(await cursor(queue)).toEqual({ acked: '3', leased: false });
  });

  it('nack: status failed with an error and consumerGroup null → redelivered with retryCount 1, then the DLQ after retryLimit', async () => {
    const queue = uniqueName('nack');
    expect((await post('/api/v1/configure', { queue, namespace: null, task: null, options: { retryLimit: 1 } })).status).toBe(200);
    await pushN(queue, 1);
    const nack = async () => {
      const m = (await pop(queue)).body.messages[0];
      const r = await post('/api/v1/ack', { transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status: 'failed', error: 'handler threw', consumerGroup: null });
      expect([r.status, r.body[0].success]).toEqual([200, true]);
      return m;
    };
    expect((await nack()).retryCount).toBe(0);
    expect((await nack()).retryCount).toBe(1);
    // Queen's DLQBuilder.get(): queue, limit, offset; the rest only when set.
    const dlq = await b.http('GET', `/api/v1/dlq?queue=${queue}&limit=100&offset=0`);
    expect(dlq.body.messages).toHaveLength(1);
    expect(dlq.body.messages[0]).toMatchObject({ queue, errorMessage: 'handler threw' });
  });

  it('transaction as TransactionBuilder sends it, with the nulls other clients add', async () => {
    const source = uniqueName('txs');
    const sink = uniqueName('txd');
    await pushN(source, 1);
    const m = (await pop(source)).body.messages[0];
    const r = await post('/api/v1/transaction', {
      operations: [
        { type: 'ack', transactionId: m.transactionId, partitionId: m.partitionId, status: 'completed', consumerGroup: null, leaseId: null, error: null },
        { type: 'push', items: [{ queue: sink, payload: { from: m.transactionId }, partition: null, transactionId: null, traceId: null }] },
      ],
      requiredLeases: [m.leaseId],
      kv: null,
      timers: null,
    });
    expect(r.status).toBe(200);
    expect(r.body.success).toBe(true);
    expect(await cursor(source)).toEqual({ acked: '1', leased: false });
    expect((await pop(sink)).body.messages.map((x: any) => x.data)).toEqual([{ from: m.transactionId }]);
  });

  it('lease renew as Queen.renew() sends it ({}), and with seconds null', async () => {
    const queue = uniqueName('renew');
    await pushN(queue, 1);
    const m = (await pop(queue)).body.messages[0];
    for (const body of [{}, { seconds: null }]) {
      const r = await post(`/api/v1/lease/${m.leaseId}/extend`, body);
      expect([r.status, r.body[0].success]).toEqual([200, true]);
    }
  });

  it('pop query strings: the text null (URLSearchParams of a JS null) reads as absent', async () => {
    const queue = uniqueName('popnull');
    await pushN(queue, 2);
    const r = await b.http('GET', `/api/v1/pop/queue/${queue}?batch=10&wait=false&timeout=30000&subscriptionMode=null&subscriptionFrom=null&autoAck=null`);
    expect(r.status).toBe(200);
    expect(r.body.messages).toHaveLength(2);
    expect(await cursor(queue)).toEqual({ acked: '0', leased: true }); // autoAck absent = false
  });

  it("subscriptionMode=new-only (Queen v1's older spelling of new) starts a group at join time", async () => {
    const queue = uniqueName('newonly');
    await pushN(queue, 2);
    const first = await pop(queue, '&consumerGroup=late&subscriptionMode=new-only');
    expect(first.status).toBe(204);
    expect((await post('/api/v1/push', { items: [{ queue, partition: 'Default', payload: 'after' }] })).status).toBe(201);
    const next = await pop(queue, '&consumerGroup=late');
    expect(next.body.messages.map((m: any) => m.data)).toEqual(['after']);
  });

  // Queen's consume(): ConsumerManager's query string, `.subscriptionMode('from_beginning')` as its tests and examples write it.
  const consumeQuery = (group: string, mode: string) => `&consumerGroup=${group}&subscriptionMode=${mode}`;

  it("subscriptionMode=from_beginning (Queen v1's spelling of all) reads a new group from the start", async () => {
    const queue = uniqueName('frombeg');
    await pushN(queue, 3);
    const r = await pop(queue, consumeQuery('g1', 'from_beginning'));
    expect(r.status).toBe(200);
    expect(r.body.messages.map((m: any) => m.data)).toEqual([{ i: 0 }, { i: 1 }, { i: 2 }]);
    const { rows } = await b.sql.query(`select s.mode from queen.subscriptions s join queen.queues q on q.id = s.queue_id where q.name = $1 and s.consumer_group = 'g1'`, [queue]);
    expect(rows).toEqual([{ mode: 'all' }]);
  });

  it('subscriptionMode=from_beginning reads from the start over QUEEN_DEFAULT_SUBSCRIPTION_MODE=new', async () => {
    const newByDefault = await startTestBroker({ databaseUrl: b.databaseUrl, config: { defaultSubscriptionMode: 'new' } });
    try {
      const queue = uniqueName('frombegnew');
      await pushN(queue, 2);
      const path = (extra: string) => `/api/v1/pop/queue/${queue}?batch=10&wait=false&timeout=30000${extra}`;
      expect((await newByDefault.http('GET', path('&consumerGroup=skips'))).status).toBe(204);
      const all = await newByDefault.http('GET', path(consumeQuery('reads', 'from_beginning')));
      expect([all.status, all.body.messages?.length]).toEqual([200, 2]);
    } finally {
      await newByDefault.stop();
    }
  });

  it('an unknown subscriptionMode is a 400 naming the parameter, and joins no group', async () => {
    const queue = uniqueName('badmode');
    await pushN(queue, 1);
    for (const mode of ['from-beginning', 'latest', 'ALL']) {
      const r = await pop(queue, consumeQuery('g', mode));
      expect([r.status, r.body.code, r.body.details.map((d: any) => d.field)], mode).toEqual([400, 'VALIDATION_FAILED', ['query.subscriptionMode']]);
    }
    expect(await cursor(queue, 'g')).toBeUndefined();
  });

  it("a stream query registered again with another config_hash: 409 CONFIG_HASH_MISMATCH whose error says 'config_hash mismatch'", async () => {
    // Queen's registerQuery(): name, source_queue, config_hash, reset always; sink_queue when the chain has one.
    const name = uniqueName('sqhash');
    const source = uniqueName('ssrc');
    const first = await post('/streams/v1/queries', { name, source_queue: source, config_hash: 'shape-1', reset: false });
    expect(first.status).toBe(200);
    const again = await post('/streams/v1/queries', { name, source_queue: source, sink_queue: uniqueName('never'), config_hash: 'shape-2', reset: false });
    expect([again.status, again.body.code, again.body.success, again.body.query_id]).toEqual([409, 'CONFIG_HASH_MISMATCH', false, first.body.query_id]);
    // Queen's client throws `new Error(err.body.error + hint)`; its suite looks for these words.
    expect(again.body.error).toMatch(/config_hash mismatch/i);
  });

  it('streams routes: register, cycle and state read with null optional fields', async () => {
    const source = uniqueName('ssrc');
    await pushN(source, 1);
    const reg = await post('/streams/v1/queries', { name: uniqueName('sq'), source_queue: source, sink_queue: null, config_hash: 'h1', reset: null });
    expect([reg.status, reg.body.success, reg.body.reset]).toEqual([200, true, false]);
    const m = (await pop(source)).body.messages[0];
    const cycle = await post('/streams/v1/cycle', {
      query_id: reg.body.query_id,
      partition_id: m.partitionId,
      consumer_group: null,
      state_ops: [{ type: 'upsert', key: 'k', value: { n: 1 }, expected_version: null }],
      push_items: null,
      ack: { transactionId: m.transactionId, leaseId: m.leaseId, status: null, count: null, error: null },
      release_lease: null,
      kv: null,
      timers: null,
    });
    expect(cycle.status).toBe(200);
    expect(cycle.body).toMatchObject({ success: true, state_ops_applied: 1, ack_result: { success: true, lease_released: true } });
    expect(await cursor(source)).toEqual({ acked: '1', leased: false });
    const state = await post('/streams/v1/state/get', { query_id: reg.body.query_id, partition_id: m.partitionId, keys: null, key_prefix: null, ripe_at_or_before: null });
    expect(state.status).toBe(200);
    expect(state.body.rows.map((r: any) => [r.key, r.value])).toEqual([['k', { n: 1 }]]);
  });

  it('a required field given null is still a 400 that names it and changes nothing', async () => {
    const queue = uniqueName('req');
    await pushN(queue, 1);
    const m = (await pop(queue)).body.messages[0];
    const r = await post('/api/v1/ack', { transactionId: null, partitionId: m.partitionId, status: 'completed', error: null, consumerGroup: null });
    expect([r.status, r.body.code, r.body.details.map((d: any) => d.field)]).toEqual([400, 'VALIDATION_FAILED', ['body.transactionId']]);
    expect(await cursor(queue)).toEqual({ acked: '0', leased: true });
  });
});
