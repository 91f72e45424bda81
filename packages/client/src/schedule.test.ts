import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { Queen, QueenError } from './index.js';

// queen.schedule() against a real broker: the definition round-trips, the
// schedule fires into the queue, and a bad expression is a typed error.

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
