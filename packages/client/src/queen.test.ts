import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { Queen, QueenError } from './index.js';

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

describe('client push, pop, ack', () => {
  it('round trip: push items and plain payloads, pop them in order, ack releases the lease', async () => {
    const q = queen.queue(uniqueName('rt'));
    const pushed = await q.push([{ payload: { n: 1 }, transactionId: 'a' }, { data: { n: 2 } }, { n: 3 }, 'four']);
    expect(pushed.map((r) => [r.status, r.offset, r.queueName])).toEqual([
      ['queued', '1', q.name],
      ['queued', '2', q.name],
      ['queued', '3', q.name],
      ['queued', '4', q.name],
    ]);
    expect(pushed[0]!.transaction_id).toBe('a');

    const popped = await q.pop({ batch: 10 });
    expect(popped).not.toBeNull();
    expect(popped!.messages.map((m) => m.data)).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }, 'four']);
    expect(popped!.leaseId).toMatch(/^[0-9a-f-]{36}$/);

    // Leased: a second pop gets nothing (null from the 204).
    expect(await q.pop({ batch: 10 })).toBeNull();

    const acks = await queen.ack(popped!.messages);
    expect(acks).toHaveLength(4);
    expect(acks.every((a) => a.success)).toBe(true);
    expect(acks[3]!.leaseReleased).toBe(true);

    // Re-acking is harmless: answered alreadyAcked, which is why acks are retried.
    const again = await queen.ack(popped!.messages[0]!);
    expect(again[0]).toMatchObject({ success: true, alreadyAcked: true });

    const { rows } = await b.sql.query(
      `select c.cursor_offset::text as cursor from queen.cursors c join queen.partitions p on p.id = c.partition_id where p.queue_name = $1`,
      [q.name],
    );
    expect(rows).toEqual([{ cursor: '4' }]);
    expect(await q.pop()).toBeNull();
  });

  it('a duplicate transactionId answers duplicate with the original offset', async () => {
    const q = queen.queue(uniqueName('dup'));
    const [first] = await q.push({ payload: 1, transactionId: 'tx-1' });
    const [second] = await q.push({ payload: 2, transactionId: 'tx-1' });
    expect(second).toMatchObject({ status: 'duplicate', offset: first!.offset, message_id: first!.message_id });
  });

  it('partition handle pins push and pop to one partition', async () => {
    const q = queen.queue(uniqueName('part'));
    await q.partition('p-a').push([{ payload: 'a1' }, { payload: 'a2' }]);
    await q.partition('p-b').push({ payload: 'b1' });
    const { rows } = await b.sql.query(
      `select p.name, count(m.*)::int as n from queen.partitions p left join queen.messages m on m.partition_id = p.id
        where p.queue_name = $1 group by p.name order by p.name`,
      [q.name],
    );
    expect(rows).toEqual([
      { name: 'p-a', n: 2 },
      { name: 'p-b', n: 1 },
    ]);

    const fromB = await q.partition('p-b').pop({ batch: 10 });
    expect(fromB!.partition).toBe('p-b');
    expect(fromB!.messages.map((m) => m.data)).toEqual(['b1']);
    const fromA = await q.partition('p-a').pop({ batch: 10, autoAck: true });
    expect(fromA!.messages.map((m) => m.data)).toEqual(['a1', 'a2']);
    expect(fromA!.leaseId).toBe('');
    expect(await q.partition('p-a').pop()).toBeNull();
  });

  it('long-poll pop is woken by a push', async () => {
    const q = queen.queue(uniqueName('lp'));
    const started = Date.now();
    const waiting = q.pop({ wait: true, timeout: 20000 });
    setTimeout(() => void q.push({ payload: 'late' }), 300);
    const res = await waiting;
    expect(res!.messages[0]!.data).toBe('late');
    expect(Date.now() - started).toBeLessThan(10000);
  });

  it('extendLease answers expiresAt for a live lease and LEASE_NOT_FOUND for an unknown one', async () => {
    const q = queen.queue(uniqueName('lease'));
    await q.push({ payload: 1 });
    const res = await q.pop();
    const ext = await queen.extendLease(res!.leaseId, 600);
    expect(ext.success).toBe(true);
    expect(Date.parse(ext.expiresAt!)).toBeGreaterThan(Date.now() + 500_000);
    const missing = await queen.extendLease('00000000-0000-4000-8000-000000000000', 60);
    expect(missing).toMatchObject({ success: false, code: 'LEASE_NOT_FOUND' });
  });

  it('a 400 is thrown as QueenError with the server code, status and details', async () => {
    const bad = queen.queue('has/slash');
    const err = await bad.push({ payload: 1 }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(QueenError);
    const qe = err as QueenError;
    expect(qe.code).toBe('VALIDATION_FAILED');
    expect(qe.status).toBe(400);
    expect(qe.details?.[0]?.field).toBe('body.items[0].queue');

    const badBatch = await queen.queue(uniqueName('v')).pop({ batch: 0 }).catch((e: QueenError) => e);
    expect(badBatch).toMatchObject({ code: 'VALIDATION_FAILED', status: 400 });
  });

  it('request() exposes any route: 404 codes and extra body fields come through', async () => {
    const err = (await queen.request('GET', `/api/v1/resources/queues/${uniqueName('none')}`).catch((e: unknown) => e)) as QueenError;
    expect(err).toBeInstanceOf(QueenError);
    expect(err.code).toBe('QUEUE_NOT_FOUND');
    expect(err.status).toBe(404);
    const health = await queen.request<{ status: string }>('GET', '/health');
    expect(health.status).toBe('healthy');
  });
});

// queen.schedule() against the real broker: the definition round-trips, the
// schedule fires into the queue, and a bad expression is a typed error.
describe('queen.schedule', () => {
  it('creates (then keeps) a schedule that pushes to its queue; list and delete through queen.api', async () => {
    const name = uniqueName('cs');
    const q = queen.queue(uniqueName('csq'));
    const created = await queen.schedule(name, { cron: '* * * * * *', timeZone: 'Europe/Berlin', queue: q.name, partition: 'p', payload: { run: 1 }, missed: 'skip' });
    expect(created).toMatchObject({ name, status: 'created', queue: q.name, partition: 'p', missed: 'skip', timeZone: 'Europe/Berlin' });
    expect((await queen.schedule(name, { cron: '* * * * * *', timeZone: 'Europe/Berlin', queue: q.name, partition: 'p', payload: { run: 1 }, missed: 'skip' })).status).toBe('unchanged');
    const popped = await eventually(async () => (await q.pop({ wait: true, timeout: 2000 })) ?? undefined, 5000);
    expect(popped.messages[0]!.data).toEqual({ run: 1 });
    expect(popped.messages[0]!.transactionId).toMatch(new RegExp(`^schedule:${name}:\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.000Z$`));
    expect((await queen.api.scheduleList()).schedules.map((s) => s.name)).toContain(name);
    expect(await queen.api.scheduleDelete({ params: { name } })).toEqual({ deleted: true, name });
    const err = await queen.api.scheduleGet({ params: { name } }).catch((e) => e);
    expect(err).toBeInstanceOf(QueenError);
    expect(err.code).toBe('SCHEDULE_NOT_FOUND');
  });

  it('a bad cron expression rejects with SCHEDULE_INVALID_CRON', async () => {
    const err = await queen.schedule(uniqueName('bad'), { cron: '61 * * * *', queue: 'q' }).catch((e) => e);
    expect(err).toBeInstanceOf(QueenError);
    expect([err.code, err.status]).toEqual(['SCHEDULE_INVALID_CRON', 400]);
  });
});
