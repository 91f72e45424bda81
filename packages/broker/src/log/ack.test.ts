import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// Ack, cursor and lease release (PROTOCOL §3.3–§3.5, §5.5) over real HTTP.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

const pushN = (queue: string, partition: string, n: number) =>
  b.http('POST', '/api/v1/push', { items: Array.from({ length: n }, (_, i) => ({ queue, partition, payload: { i } })) });
const pop = (queue: string, qs = '') => b.http('GET', `/api/v1/pop/queue/${encodeURIComponent(queue)}${qs ? `?${qs}` : ''}`);
const ack = (m: any, extra: Record<string, unknown> = {}) =>
  b.http('POST', '/api/v1/ack', { transactionId: m.transactionId, partitionId: m.partitionId, ...extra });
const setOptions = (queue: string, options: Record<string, unknown>) =>
  b.sql.query('update queen.queues set options = options || $2::jsonb where name = $1', [queue, JSON.stringify(options)]);

async function cursorOf(group: string, queue: string, partition = 'p') {
  const r = await b.http('GET', `/api/v1/consumer-groups/${encodeURIComponent(group)}?queue=${encodeURIComponent(queue)}`);
  return (r.body.partitions as any[]).find((p) => p.partition === partition);
}

describe('ack', () => {
  it('B17 full ack releases the lease on the last delivered message', async () => {
    const q = uniqueName('b17');
    await pushN(q, 'p', 3);
    const r = await pop(q, 'batch=3');
    const msgs = r.body.messages as any[];
    expect(msgs).toHaveLength(3);
    const results = [];
    for (const m of msgs) results.push((await ack(m, { leaseId: m.leaseId })).body[0]);
    expect(results.map((x) => x.success)).toEqual([true, true, true]);
    expect(results.map((x) => x.leaseReleased)).toEqual([false, false, true]);
    expect(results.map((x) => x.offset)).toEqual(['1', '2', '3']);
    expect(results[0]).toMatchObject({ index: 0, transactionId: msgs[0].transactionId, queueName: q, partitionName: 'p', dlq: false, alreadyAcked: false, error: null, code: null });
    expect((await pop(q, 'batch=3')).status).toBe(204);
    expect(await cursorOf('__QUEUE_MODE__', q)).toMatchObject({ cursor: '3', leased: false, lag: 0 });
  });

  it('a message pushed without a transactionId answers to its id; id-shaped strings that name nothing are MESSAGE_NOT_FOUND', async () => {
    // Only client-chosen transactionIds are stored; the broker's id stands in
    // for the rest and is resolved through the offset bits it carries.
    const q = uniqueName('idtx');
    await b.http('POST', '/api/v1/push', { items: [
      { queue: q, partition: 'p', payload: 1 },
      { queue: q, partition: 'p', payload: 2, transactionId: 'chosen-2' },
      { queue: q, partition: 'p', payload: 3 },
    ] });
    const msgs = (await pop(q, 'batch=3')).body.messages as any[];
    expect(msgs.map((m) => m.transactionId === m.id)).toEqual([true, false, true]);
    expect(msgs[1].transactionId).toBe('chosen-2');
    const stored = await b.sql.query('select msg_offset::int as o, transaction_id from queen.messages where partition_id = $1 order by 1', [msgs[0].partitionId]);
    expect(stored.rows).toEqual([{ o: 1, transaction_id: null }, { o: 2, transaction_id: 'chosen-2' }, { o: 3, transaction_id: null }]);

    // Another partition's id, this id with another random tail (same offset
    // bits), a non-uuid, and the id of the message that has a chosen one.
    const other = uniqueName('idtx-other');
    await pushN(other, 'p', 1);
    const foreign = (await pop(other)).body.messages[0];
    const otherTail = msgs[0].id.slice(0, -1) + (msgs[0].id.endsWith('0') ? '1' : '0');
    for (const transactionId of [foreign.transactionId, otherTail, 'not-a-uuid', msgs[1].id]) {
      const r = await b.http('POST', '/api/v1/ack', { transactionId, partitionId: msgs[0].partitionId, leaseId: msgs[0].leaseId });
      expect(r.body[0]).toMatchObject({ success: false, code: 'MESSAGE_NOT_FOUND' });
    }
    const upper = await b.http('POST', '/api/v1/ack', { transactionId: msgs[0].transactionId.toUpperCase(), partitionId: msgs[0].partitionId, leaseId: msgs[0].leaseId });
    expect(upper.body[0]).toMatchObject({ success: true, offset: '1' });
    // Pushing a message's id as a transactionId again is a duplicate of it.
    const again = await b.http('POST', '/api/v1/push', { items: [{ queue: q, partition: 'p', payload: 'again', transactionId: msgs[2].id }] });
    expect(again.body[0]).toMatchObject({ status: 'duplicate', message_id: msgs[2].id, offset: '3' });
    const rest = await b.http('POST', '/api/v1/ack/batch', { acknowledgments: msgs.slice(1).map((m) => ({ transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId })) });
    expect(rest.body.map((x: any) => [x.success, x.offset])).toEqual([[true, '2'], [true, '3']]);
    expect(rest.body[1].leaseReleased).toBe(true);
  });

  it('B18 partial ack keeps the lease; after expiry the rest comes back uncharged', async () => {
    const q = uniqueName('b18');
    await pushN(q, 'p', 5);
    await setOptions(q, { leaseTime: 2 });
    const r = await pop(q, 'batch=5');
    expect(r.body.messages.map((m: any) => m.offset)).toEqual(['1', '2', '3', '4', '5']);
    const third = r.body.messages[2];
    const a = await ack(third, { leaseId: third.leaseId });
    expect(a.body[0]).toMatchObject({ success: true, leaseReleased: false, offset: '3' });
    expect((await pop(q, 'batch=5')).status).toBe(204);
    const again = await eventually(async () => {
      const x = await pop(q, 'batch=5');
      return x.status === 200 ? x : undefined;
    }, 5000, 100);
    expect(again.body.messages.map((m: any) => [m.offset, m.retryCount])).toEqual([
      ['4', 0],
      ['5', 0],
    ]);
  });

  it('B18 with leaseExpiryCountsAsFailure the expiry charges the head message once', async () => {
    const q = uniqueName('b18f');
    await pushN(q, 'p', 5);
    await setOptions(q, { leaseTime: 1, leaseExpiryCountsAsFailure: true });
    const r = await pop(q, 'batch=5');
    const third = r.body.messages[2];
    await ack(third, { leaseId: third.leaseId });
    const again = await eventually(async () => {
      const x = await pop(q, 'batch=5');
      return x.status === 200 ? x : undefined;
    }, 5000, 100);
    expect(again.body.messages.map((m: any) => [m.offset, m.retryCount])).toEqual([
      ['4', 1],
      ['5', 0],
    ]);
  });

  it('B19 the cursor never moves back; acks are fenced by what the lease delivered', async () => {
    const q = uniqueName('b19');
    await pushN(q, 'p', 3);
    const r = await pop(q, 'batch=3');
    const [m1, , m3] = r.body.messages;
    expect((await ack(m3, { leaseId: m3.leaseId })).body[0]).toMatchObject({ success: true, leaseReleased: true });
    const late = await ack(m1);
    expect(late.body[0]).toMatchObject({ success: true, alreadyAcked: true, leaseReleased: false, offset: '1' });
    expect(await cursorOf('__QUEUE_MODE__', q)).toMatchObject({ cursor: '3' });

    const q2 = uniqueName('b19b');
    await pushN(q2, 'p', 5);
    const two = await pop(q2, 'batch=2');
    expect(two.body.messages).toHaveLength(2);
    const probe = await pop(q2, 'batch=5&consumerGroup=reader');
    const m5 = probe.body.messages[4];
    const fenced = await ack(m5, { leaseId: two.body.leaseId });
    expect(fenced.body[0]).toMatchObject({ success: false, code: 'MESSAGE_NOT_LEASED', offset: '5' });
    expect(await cursorOf('__QUEUE_MODE__', q2)).toMatchObject({ cursor: '0', leased: true });
  });

  it('B20 acking everything delivered releases the lease at once', async () => {
    const q = uniqueName('b20');
    await pushN(q, 'p', 4);
    const r = await pop(q, 'batch=10');
    expect(r.body.messages).toHaveLength(4);
    const res = await b.http('POST', '/api/v1/ack/batch', {
      acknowledgments: r.body.messages.map((m: any) => ({ transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId })),
    });
    expect(res.body.map((x: any) => [x.success, x.leaseReleased])).toEqual([
      [true, false],
      [true, false],
      [true, false],
      [true, true],
    ]);
    await pushN(q, 'p', 1);
    const next = await pop(q, 'batch=10');
    expect(next.status).toBe(200);
    expect(next.body.messages.map((m: any) => m.offset)).toEqual(['5']);
  });

  it('an ack without any lease reports leaseReleased:false', async () => {
    const q = uniqueName('nolease');
    await pushN(q, 'p', 2);
    const peek = await pop(q, 'batch=2&consumerGroup=peek');
    const res = await b.http('POST', '/api/v1/ack', { transactionId: peek.body.messages[0].transactionId, partitionId: peek.body.partitionId, consumerGroup: 'other' });
    expect(res.body[0]).toMatchObject({ success: true, leaseReleased: false, alreadyAcked: false });
    expect(await cursorOf('other', q)).toMatchObject({ cursor: '1', leased: false });
  });

  it('unknown messages answer MESSAGE_NOT_FOUND per item without undoing the others', async () => {
    const q = uniqueName('notfound');
    await pushN(q, 'p', 2);
    const r = await pop(q, 'batch=2');
    const [m1, m2] = r.body.messages;
    const res = await b.http('POST', '/api/v1/ack/batch', {
      acknowledgments: [
        { transactionId: m2.transactionId, partitionId: m2.partitionId, leaseId: m2.leaseId },
        { transactionId: 'missing', partitionId: m1.partitionId },
        { transactionId: m1.transactionId, partitionId: m1.partitionId, leaseId: m1.leaseId },
      ],
    });
    expect(res.status).toBe(200);
    expect(res.body.map((x: any) => [x.index, x.success, x.code])).toEqual([
      [0, true, null],
      [1, false, 'MESSAGE_NOT_FOUND'],
      [2, true, null],
    ]);
    expect(res.body[1].error).toBe('Message not found');
    expect(await cursorOf('__QUEUE_MODE__', q)).toMatchObject({ cursor: '2', leased: false });
  });

  it('an ack/batch of 10000 items stays fast', async () => {
    const q = uniqueName('bulkack');
    for (let k = 0; k < 4; k++) await pushN(q, `p${k}`, 2500);
    const msgs: any[] = [];
    for (let k = 0; k < 4; k++) msgs.push(...(await b.http('GET', `/api/v1/pop/queue/${q}/partition/p${k}?batch=2500`)).body.messages);
    expect(msgs).toHaveLength(10000);
    const t0 = Date.now();
    const res = await b.http('POST', '/api/v1/ack/batch', {
      acknowledgments: msgs.map((m) => ({ transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId })),
    });
    const ms = Date.now() - t0;
    console.log(`10000-item ack/batch over 4 partitions: ${ms} ms`);
    expect(res.body).toHaveLength(10000);
    expect(res.body.every((x: any, i: number) => x.success && x.index === i)).toBe(true);
    expect(res.body.filter((x: any) => x.leaseReleased)).toHaveLength(4);
    // Was minutes when results were accumulated by growing a jsonb value.
    expect(ms).toBeLessThan(20000);
  });

  it('B43 message rows are immutable: pop, ack, failed ack, dlq, seek and extend never write them', async () => {
    const q = uniqueName('b43');
    await pushN(q, 'p', 6);
    const snapshot = async () =>
      (
        await b.sql.query(
          `select m.msg_offset::int as o, m.xmin::text as x from queen.messages m join queen.partitions p on p.id = m.partition_id
            where p.queue_name = $1 order by m.msg_offset`,
          [q],
        )
      ).rows;
    const before = await snapshot();
    expect(before).toHaveLength(6);

    const r = await pop(q, 'batch=2');
    const [m1, m2] = r.body.messages;
    expect((await b.http('POST', `/api/v1/lease/${r.body.leaseId}/extend`, { seconds: 120 })).body[0].success).toBe(true);
    expect((await ack(m1, { leaseId: m1.leaseId })).body[0].success).toBe(true);
    expect((await ack(m2, { leaseId: m2.leaseId, status: 'failed', error: 'boom' })).body[0]).toMatchObject({ success: true, dlq: false });
    const r2 = await pop(q, 'batch=1');
    expect(r2.body.messages[0]).toMatchObject({ offset: '2', retryCount: 1 });
    expect((await ack(r2.body.messages[0], { leaseId: r2.body.leaseId, status: 'dlq', error: 'poison' })).body[0]).toMatchObject({ success: true, dlq: true });
    const r3 = await pop(q, 'batch=10&autoAck=true');
    expect(r3.body.messages.map((m: any) => m.offset)).toEqual(['3', '4', '5', '6']);
    const { rows: dlq } = await b.sql.query(
      `select d.msg_offset::int as o, d.error_message as e, d.retry_count as n from queen.dlq d join queen.partitions p on p.id = d.partition_id where p.queue_name = $1`,
      [q],
    );
    expect(dlq).toEqual([{ o: 2, e: 'poison', n: 1 }]);
    const seek = await b.http('POST', `/api/v1/consumer-groups/__QUEUE_MODE__/queues/${q}/partitions/p/seek`, { offset: '1' });
    expect(seek.body).toMatchObject({ success: true, cursorMovedTo: '1' });
    const r4 = await pop(q, 'batch=10');
    expect(r4.body.messages.map((m: any) => m.offset)).toEqual(['2', '3', '4', '5', '6']);
    expect((await b.http('POST', `/api/v1/lease/${r4.body.leaseId}/extend`, { seconds: 60 })).body[0].success).toBe(true);
    expect(await snapshot()).toEqual(before);
  });
});
