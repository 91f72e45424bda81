import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { eventually, sleep, startTestBroker, uniqueName, VirtualClock, type TestBroker } from '@queen-mq/testing';
import { fireDueSchedules } from './schedule-firer.js';

// Recurring schedules over real HTTP on a real PostgreSQL: the routes, the
// firer every broker runs (per-second schedules keep it fast), several
// brokers on one database, and missed fire times across a broker restart on
// a virtual database clock.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

const upsert = (body: unknown, broker = b) => broker.http('POST', '/api/v1/schedules', body);
const messages = async (queue: string, sql = b.sql) =>
  (
    await sql.query(
      `select m.transaction_id, m.payload, m.created_at, m.producer_sub from queen.messages m join queen.partitions p on p.id = m.partition_id
        where p.queue_name = $1 order by m.msg_offset`,
      [queue],
    )
  ).rows as { transaction_id: string; payload: unknown; created_at: Date }[];
const fireTimes = (rows: { transaction_id: string }[], name: string) =>
  rows.map((r) => {
    expect(r.transaction_id.startsWith(`schedule:${name}:`)).toBe(true);
    return r.transaction_id.slice(`schedule:${name}:`.length);
  });
const firedTotal = async (broker: TestBroker) => Number(/^queen_schedule_fires_total (\d+)/m.exec((await broker.http('GET', '/metrics')).body as string)?.[1] ?? 0);
const duplicatesOf = async (broker: TestBroker, queue: string) =>
  Number(new RegExp(`^queen_messages_duplicate_total\\{queue="${queue}"\\} (\\d+)`, 'm').exec((await broker.http('GET', '/metrics')).body as string)?.[1] ?? 0);
/**
 * Fires what is due now and waits until every schedule is past it: the
 * broker's own firer may hold a row at that moment (this pass then skips
 * it), and its commit is what the test reads.
 */
async function fireNow(broker: TestBroker) {
  await fireDueSchedules(broker.ctx);
  await eventually(async () => (await broker.sql.query('select count(*)::int as n from queen.schedules where next_fire_at <= clock_timestamp()')).rows[0].n === 0, 5000);
}
const scheduleRows = async () => Number((await b.sql.query('select count(*) from queen.schedules')).rows[0].count);

describe('schedules: routes', () => {
  it('creates, answers unchanged for the same definition, replaces a changed one, lists, gets and deletes', async () => {
    const name = uniqueName('crud');
    const q = uniqueName('crudq');
    const body = { name, cron: '0 6 * * *', timeZone: 'Europe/Berlin', queue: q, payload: { report: 'daily' } };
    const created = await upsert(body);
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ ...body, partition: 'Default', missed: 'one', status: 'created', lastFireAt: null });
    expect(Date.parse(created.body.nextFireAt)).toBeGreaterThan(Date.now());

    const again = await upsert(body);
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ ...created.body, status: 'unchanged' });

    const changed = await upsert({ ...body, cron: '0 7 * * *', missed: 'skip' });
    expect(changed.status).toBe(200);
    expect(changed.body).toMatchObject({ cron: '0 7 * * *', missed: 'skip', status: 'updated' });
    expect(changed.body.nextFireAt).not.toBe(created.body.nextFireAt);

    const list = await b.http('GET', '/api/v1/schedules');
    expect(list.status).toBe(200);
    const { status: _, ...stored } = changed.body;
    expect(list.body.schedules).toContainEqual(stored);
    expect(list.body.total).toBe(list.body.schedules.length);
    expect((await b.http('GET', '/api/v1/schedules?limit=1')).body.schedules.length).toBe(1);
    expect((await b.http('GET', `/api/v1/schedules/${name}`)).body).toEqual(stored);

    expect((await b.http('DELETE', `/api/v1/schedules/${name}`)).body).toEqual({ deleted: true, name });
    expect((await b.http('DELETE', `/api/v1/schedules/${name}`)).body).toEqual({ deleted: false, name });
    const gone = await b.http('GET', `/api/v1/schedules/${name}`);
    expect(gone.status).toBe(404);
    expect(gone.body.code).toBe('SCHEDULE_NOT_FOUND');
  });

  it('the next fire time is computed in the schedule time zone (Asia/Kolkata is UTC+05:30 all year)', async () => {
    const name = uniqueName('tz');
    const r = await upsert({ name, cron: '0 6 * * *', timeZone: 'Asia/Kolkata', queue: uniqueName('tzq') });
    expect(r.status).toBe(201);
    const next = new Date(r.body.nextFireAt);
    expect([next.getUTCHours(), next.getUTCMinutes(), next.getUTCSeconds()]).toEqual([0, 30, 0]);
    expect(next.getTime() - Date.now()).toBeLessThanOrEqual(86400_000);
    await b.http('DELETE', `/api/v1/schedules/${name}`);
  });

  it('bad input gets a 4xx with a stable code and changes nothing', async () => {
    const before = await scheduleRows();
    const base = { name: uniqueName('bad'), cron: '* * * * *', queue: 'q' };
    const cases: [unknown, number, string, string?][] = [
      [{ ...base, cron: 'every day' }, 400, 'SCHEDULE_INVALID_CRON', 'body.cron'],
      [{ ...base, cron: '0 0 30 2 *' }, 400, 'SCHEDULE_INVALID_CRON', 'body.cron'],
      [{ ...base, cron: '* * * * * * *' }, 400, 'SCHEDULE_INVALID_CRON', 'body.cron'],
      [{ ...base, timeZone: 'Mars/Olympus' }, 400, 'SCHEDULE_INVALID_TIME_ZONE', 'body.timeZone'],
      [{ ...base, name: 'has space' }, 400, 'VALIDATION_FAILED', 'body.name'],
      [{ ...base, missed: 'some' }, 400, 'VALIDATION_FAILED', 'body.missed'],
      [{ name: base.name, cron: base.cron }, 400, 'VALIDATION_FAILED', 'body.queue'],
      [{ ...base, cron: 5 }, 400, 'VALIDATION_FAILED', 'body.cron'],
    ];
    for (const [body, status, code, field] of cases) {
      const r = await upsert(body);
      expect([r.status, r.body.code], JSON.stringify(body)).toEqual([status, code]);
      if (field) expect(r.body.details?.map((d: { field: string }) => d.field)).toContain(field);
    }
    expect((await b.http('GET', '/api/v1/schedules/has%20space')).status).toBe(400);
    expect(await scheduleRows()).toBe(before);
  });
});

describe('schedules: firing', () => {
  it('an every-second schedule pushes one message per second with transactionId schedule:<name>:<fire time>, never early', async () => {
    const name = uniqueName('sec');
    const q = uniqueName('secq');
    const r = await upsert({ name, cron: '* * * * * *', queue: q, partition: 'p1', payload: { tick: true } });
    expect(r.status).toBe(201);
    // A parked pop is woken by the fire.
    const popped = await b.http('GET', `/api/v1/pop/queue/${q}?wait=true&timeout=3000`);
    expect(popped.status).toBe(200);
    expect(popped.body.messages[0].data).toEqual({ tick: true });
    await sleep(3200);
    await b.http('DELETE', `/api/v1/schedules/${name}`);
    const rows = await messages(q);
    const times = fireTimes(rows, name);
    expect(times.length).toBeGreaterThanOrEqual(3);
    expect(times.length).toBeLessThanOrEqual(5);
    // Consecutive whole seconds, each once.
    times.forEach((t, i) => {
      expect(t).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000Z$/);
      if (i) expect(Date.parse(t) - Date.parse(times[i - 1]!)).toBe(1000);
    });
    for (const [i, m] of rows.entries()) expect(m.created_at.getTime()).toBeGreaterThanOrEqual(Date.parse(times[i]!));
    // Deleted: nothing more.
    await sleep(1500);
    expect((await messages(q)).length).toBe(rows.length);
  });

  it('two brokers on one database (and extra firers racing) never push one fire time twice; a held row is skipped, not waited for', async () => {
    const second = await startTestBroker({ databaseUrl: b.databaseUrl });
    try {
      const before = (await firedTotal(b)) + (await firedTotal(second));
      const name = uniqueName('two');
      const q = uniqueName('twoq');
      await upsert({ name, cron: '* * * * * *', queue: q }, second);
      const until = Date.now() + 3500;
      // Beside both brokers' firers, five extra passes per broker race every ~100 ms.
      while (Date.now() < until) {
        await Promise.all([...Array(5).fill(b), ...Array(5).fill(second)].map((x: TestBroker) => fireDueSchedules(x.ctx)));
        await sleep(100);
      }
      // A pass finds the row locked by another transaction: it skips it (fires nothing), never blocks.
      const holder = new pg.Client({ connectionString: b.databaseUrl });
      await holder.connect();
      try {
        await holder.query('begin');
        await holder.query('select 1 from queen.schedules where name = $1 for update', [name]);
        await sleep(1100);
        const t0 = Date.now();
        expect((await fireDueSchedules(b.ctx)).fired).toBe(0);
        expect(Date.now() - t0).toBeLessThan(1000);
        await holder.query('rollback');
      } finally {
        await holder.end();
      }
      await eventually(async () => (await b.sql.query('select next_fire_at > clock_timestamp() as ok from queen.schedules where name = $1', [name])).rows[0].ok, 5000);
      await b.http('DELETE', `/api/v1/schedules/${name}`);
      const rows = await messages(q);
      const times = fireTimes(rows, name);
      expect(new Set(times).size).toBe(times.length);
      expect(times.length).toBeGreaterThanOrEqual(4);
      // Every message was counted once, by the broker that pushed it, and no
      // pass pushed a fire time another had pushed (the dedup never answered).
      expect((await firedTotal(b)) + (await firedTotal(second)) - before).toBe(rows.length);
      expect((await duplicatesOf(b, q)) + (await duplicatesOf(second, q))).toBe(0);
    } finally {
      await second.stop();
    }
  });

  it('a fire time pushed again (next_fire_at set back) is answered by the allocator dedup: no second message', async () => {
    const name = uniqueName('dedup');
    const q = uniqueName('dedupq');
    await upsert({ name, cron: '* * * * * *', queue: q });
    await eventually(async () => (await messages(q)).length >= 1, 4000);
    await b.http('DELETE', `/api/v1/schedules/${name}`);
    const first = await messages(q);
    // The same definition back, its next fire time set to the first one already pushed.
    await upsert({ name, cron: '* * * * * *', queue: q, missed: 'all' });
    await b.sql.query('update queen.schedules set next_fire_at = $2 where name = $1', [name, fireTimes(first, name)[0]]);
    const before = await firedTotal(b);
    await fireNow(b);
    await b.http('DELETE', `/api/v1/schedules/${name}`);
    const times = fireTimes(await messages(q), name);
    expect(new Set(times).size).toBe(times.length);
    expect(times.slice(0, first.length)).toEqual(fireTimes(first, name));
    // The re-pushed fire times were duplicates, not counted as fired.
    expect((await firedTotal(b)) - before).toBe(times.length - first.length);
    expect(await duplicatesOf(b, q)).toBeGreaterThanOrEqual(first.length);
  });
});

describe('schedules: missed fire times across a restart (virtual database clock)', () => {
  it('a broker stopped for 10.5 s then restarted: skip pushes none of the missed, one the latest, all each; the on-time one always', async () => {
    const T0 = Date.parse('2026-03-28T12:00:00.000Z');
    const first = await startTestBroker({ virtualClock: T0 });
    const databaseUrl = first.databaseUrl;
    const names = { skip: uniqueName('skip'), one: uniqueName('one'), all: uniqueName('all') };
    for (const [missed, name] of Object.entries(names)) {
      const r = await upsert({ name, cron: '* * * * * *', queue: name, missed }, first);
      expect(r.body.nextFireAt).toBe('2026-03-28T12:00:01.000000Z');
    }
    await first.stop();

    const sql = new pg.Pool({ connectionString: databaseUrl, max: 2 });
    const clock = new VirtualClock(sql, T0);
    try {
      // Nothing ran from 12:00:01 to 12:00:10.5: 1..9 are missed (older than the 1 s misfire bound), 10 is on time.
      await clock.set(T0 + 10_500);
      const restarted = await startTestBroker({ databaseUrl });
      try {
        await eventually(async () => {
          const { rows } = await sql.query('select count(*)::int as n from queen.schedules where name = any($1) and next_fire_at > clock_timestamp()', [Object.values(names)]);
          return rows[0].n === 3;
        }, 5000);
        const at = (s: number) => new Date(T0 + s * 1000).toISOString();
        expect(fireTimes(await messages(names.skip, sql), names.skip)).toEqual([at(10)]);
        expect(fireTimes(await messages(names.one, sql), names.one)).toEqual([at(9), at(10)]);
        expect(fireTimes(await messages(names.all, sql), names.all)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map(at));
        const { rows } = await sql.query('select name, queen.iso(next_fire_at) as next, queen.iso(last_fire_at) as last from queen.schedules order by name');
        for (const r of rows) expect(r).toMatchObject({ next: '2026-03-28T12:00:11.000000Z', last: '2026-03-28T12:00:10.000000Z' });
        // Running on time: each later second exactly once.
        await clock.set(T0 + 11_200);
        await fireNow(restarted);
        expect(fireTimes(await messages(names.skip, sql), names.skip)).toEqual([at(10), at(11)]);
      } finally {
        await restarted.stop();
      }
    } finally {
      await sql.end();
    }
  });

  it('missed all catches up at most 1000 fire times, the most recent', async () => {
    const T0 = Date.parse('2026-06-01T00:00:00.000Z');
    const broker = await startTestBroker({ virtualClock: T0 });
    try {
      const name = uniqueName('bound');
      await upsert({ name, cron: '* * * * * *', queue: name, missed: 'all' }, broker);
      // 1199 missed (1..1199 s) and one on time (1200 s).
      await broker.clock!.set(T0 + 1_200_500);
      await fireNow(broker);
      const times = fireTimes(await messages(name, broker.sql), name);
      expect(times.length).toBe(1001);
      expect(times[0]).toBe(new Date(T0 + 200_000).toISOString());
      expect(times.at(-1)).toBe(new Date(T0 + 1_200_000).toISOString());
    } finally {
      await broker.stop();
    }
  });

  it('across the spring-forward of Europe/Berlin a daily 06:00 fires at 05:00Z then 04:00Z, and 02:30 (a wall time skipped that night) at 01:30Z, then 01:00Z (03:00 CEST), then 00:30Z', async () => {
    const T0 = Date.parse('2026-03-28T00:00:00.000Z');
    const broker = await startTestBroker({ virtualClock: T0 });
    try {
      const six = uniqueName('six');
      const half = uniqueName('half');
      expect((await upsert({ name: six, cron: '0 6 * * *', timeZone: 'Europe/Berlin', queue: six, missed: 'all' }, broker)).body.nextFireAt).toBe('2026-03-28T05:00:00.000000Z');
      expect((await upsert({ name: half, cron: '30 2 * * *', timeZone: 'Europe/Berlin', queue: half, missed: 'all' }, broker)).body.nextFireAt).toBe('2026-03-28T01:30:00.000000Z');
      // Two days on (a stopped-broker gap): `all` pushes each missed fire time, on either side of the switch.
      await broker.clock!.set(Date.parse('2026-03-30T04:00:00.500Z'));
      await fireNow(broker);
      expect(fireTimes(await messages(six, broker.sql), six)).toEqual(['2026-03-28T05:00:00.000Z', '2026-03-29T04:00:00.000Z', '2026-03-30T04:00:00.000Z']);
      expect(fireTimes(await messages(half, broker.sql), half)).toEqual(['2026-03-28T01:30:00.000Z', '2026-03-29T01:00:00.000Z', '2026-03-30T00:30:00.000Z']);
      expect((await broker.http('GET', `/api/v1/schedules/${half}`)).body.nextFireAt).toBe('2026-03-31T00:30:00.000000Z');
      expect((await broker.http('GET', `/api/v1/schedules/${six}`)).body.nextFireAt).toBe('2026-03-31T04:00:00.000000Z');
    } finally {
      await broker.stop();
    }
  });
});
