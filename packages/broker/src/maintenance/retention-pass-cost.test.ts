import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleep, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// A retention pass (PROTOCOL §3.9) costs what it drops, not what is retained:
// it opens a transaction for each partition with a segment due,
// and none for the partitions of retained queues with nothing to drop. It
// opened one per retained partition: a pass over 20,000 of them, nothing to
// drop, was 20,000 transactions.

let b: TestBroker;
let transactions = 0;
beforeAll(async () => {
  b = await startTestBroker();
  const db = b.ctx.db;
  const transaction = db.transaction.bind(db);
  db.transaction = ((fn: any) => {
    transactions += 1;
    return transaction(fn);
  }) as typeof db.transaction;
});
afterAll(async () => b?.stop());

const configure = (queue: string, options: Record<string, unknown>) => b.http('POST', '/api/v1/configure', { queue, options });
const push = (queue: string, partitions: number) =>
  b.http('POST', '/api/v1/push', { items: Array.from({ length: partitions }, (_, p) => ({ queue, partition: `p${p}`, payload: p })) });

describe('retention pass cost', () => {
  it('a pass opens a transaction per partition with a segment due, none for retained partitions with nothing due', async () => {
    // 300 partitions kept a day, 200 whose readers have not consumed them,
    // 100 waiting long: all retained, none due.
    const kept = uniqueName('kept');
    const unread = uniqueName('unread');
    const waiting = uniqueName('waiting');
    await configure(kept, { retentionEnabled: true, retentionSeconds: 86400 });
    await configure(unread, { retentionEnabled: true, completedRetentionSeconds: 1 });
    await configure(waiting, { maxWaitTimeSeconds: 86400 });
    await push(kept, 300);
    await push(unread, 200);
    await push(waiting, 100);
    // A reader of `unread` that consumed 2 of its partitions: those 2 are due.
    for (const p of ['p0', 'p1']) {
      const got = await b.http('GET', `/api/v1/pop/queue/${unread}/partition/${p}?consumerGroup=g&wait=false`);
      const m = got.body.messages[0];
      await b.http('POST', '/api/v1/ack', { consumerGroup: 'g', transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId });
    }
    // And 5 partitions whose time is up.
    const due = uniqueName('due');
    await configure(due, { retentionEnabled: true, retentionSeconds: 1 });
    await push(due, 5);
    await sleep(2100);
    // Due from earlier tests of this database: none (a fresh one).
    const before = transactions;
    const r = (await b.http('POST', '/api/v1/system/maintenance/run', { tasks: ['retention'] })).body;
    const opened = transactions - before;
    console.log(`retention pass over 607 retained partitions, 7 due: ${opened} transactions`);
    expect(r.retention).toEqual({ segmentsDropped: 7, messagesDropped: 7 });
    // One for the candidates, one per due partition.
    expect(opened).toBe(1 + 7);

    // What was not due is intact; what was is gone.
    const counts = await b.sql.query<{ queue_name: string; n: number }>(
      `select p.queue_name, count(m.*)::int as n from queen.partitions p left join queen.messages m on m.partition_id = p.id
        where p.queue_name = any($1) group by 1`,
      [[kept, unread, waiting, due]],
    );
    expect(Object.fromEntries(counts.rows.map((c) => [c.queue_name, c.n]))).toEqual({ [kept]: 300, [unread]: 198, [waiting]: 100, [due]: 0 });
  }, 60000);
});
