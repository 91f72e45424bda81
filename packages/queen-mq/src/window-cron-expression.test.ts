import { beforeAll, describe, expect, it } from 'vitest';
import { type TestBroker } from '@queen-mq/testing';
import { type Queen, Stream } from './index.js';
import { collectUntil, push, stateRows, useStreamBroker, SEP, runDefaults, withBounds } from '../test/helpers.js';

// Cron expressions in a time zone over real HTTP and PostgreSQL (the bucket
// properties are in packages/windows/cron), and the config hashes of the unit
// form, which stored state depends on.

const env = useStreamBroker();
const { names, track } = env;
let b: TestBroker;
let queen: Queen;
beforeAll(() => {
  ({ b, queen } = env);
});

describe('cron expression windows', () => {
  it('business hours in Europe/Berlin: office hours, then Friday 17:00 CET to Monday 09:00 CEST across the DST switch', async () => {
    const { src, sink, queryId } = await names('cron-office');
    const h = track(
      await Stream.from(queen.queue(src))
        .windowCron({ expression: '0 9-17 * * MON-FRI', timeZone: 'Europe/Berlin', idleFlushMs: 0, eventTime: (m) => m.data.ts })
        .aggregate({ count: () => 1, sum: (m) => m.n })
        .map(withBounds)
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults }),
    );
    const [p] = await push(b, src, [
      { ts: '2026-03-27T14:30:00.000Z', n: 1 }, // Fri 15:30 CET
      { ts: '2026-03-27T14:59:59.999Z', n: 2 }, // Fri 15:59:59.999 CET
      { ts: '2026-03-27T16:00:00.000Z', n: 4 }, // Fri 17:00 CET: the evening window opens
      { ts: '2026-03-29T10:00:00.000Z', n: 8 }, // Sun 12:00 CEST
      { ts: '2026-03-30T06:59:59.999Z', n: 16 }, // Mon 08:59:59.999 CEST
      { ts: '2026-03-30T07:00:00.000Z', n: 32 }, // Mon 09:00 CEST: closes the weekend
    ]);
    const got = await collectUntil(b, sink, (all) => all.length >= 2, 8000, 500);
    expect(got.map((m) => m.data)).toEqual([
      { count: 2, sum: 3, start: '2026-03-27T14:00:00.000Z', end: '2026-03-27T15:00:00.000Z' },
      { count: 3, sum: 28, start: '2026-03-27T16:00:00.000Z', end: '2026-03-30T07:00:00.000Z' },
    ]);
    const rows = await stateRows(b, h.queryUuid, p!.partition_id);
    const open = rows.find((r) => r.key === `cron:0 9-17 * * MON-FRI@Europe/Berlin${SEP}2026-03-30T07:00:00.000Z${SEP}${p!.partition_id}`);
    expect(open?.value).toEqual({ acc: { count: 1, sum: 32 }, windowStart: Date.parse('2026-03-30T07:00:00.000Z'), windowEnd: Date.parse('2026-03-30T08:00:00.000Z') });
    expect(rows.map((r) => r.key).sort()).toEqual(['__wm__', open!.key]);
  });

  it('local days in Europe/Berlin: the 25-hour 2026-10-25 is one window', async () => {
    const { src, sink, queryId } = await names('cron-days');
    track(
      await Stream.from(queen.queue(src))
        .windowCron({ expression: '0 0 * * *', timeZone: 'Europe/Berlin', idleFlushMs: 0, eventTime: (m) => m.data.ts })
        .aggregate({ count: () => 1 })
        .map(withBounds)
        .to(queen.queue(sink))
        .run({ queryId, url: b.url, ...runDefaults }),
    );
    await push(b, src, [
      { ts: '2026-10-24T21:59:59.999Z' }, // Sat 23:59:59.999 CEST
      { ts: '2026-10-24T22:00:00.000Z' }, // Sun 00:00 CEST
      { ts: '2026-10-25T00:30:00.000Z' }, // Sun 02:30 CEST
      { ts: '2026-10-25T01:30:00.000Z' }, // Sun 02:30 CET, the repeated hour
      { ts: '2026-10-25T22:59:59.999Z' }, // Sun 23:59:59.999 CET
      { ts: '2026-10-25T23:00:00.000Z' }, // Mon 00:00 CET
    ]);
    const got = await collectUntil(b, sink, (all) => all.length >= 2, 8000, 500);
    expect(got.map((m) => m.data)).toEqual([
      { count: 1, start: '2026-10-23T22:00:00.000Z', end: '2026-10-24T22:00:00.000Z' },
      { count: 4, start: '2026-10-24T22:00:00.000Z', end: '2026-10-25T23:00:00.000Z' },
    ]);
  });
});

describe('config hashes', () => {
  const hashOf = (window: Parameters<Stream['windowCron']>[0]) => Stream.from({ name: 'orders' }).windowCron(window).aggregate({ count: () => 1 }).to({ name: 'out' }).compile().configHash;

  it('S5 the unit form keeps the hashes of 0.1.0 (stored state is registered under them)', () => {
    expect({
      second: hashOf({ every: 'second' }),
      minute: hashOf({ every: 'minute' }),
      hour: hashOf({ every: 'hour' }),
      day: hashOf({ every: 'day' }),
      week: hashOf({ every: 'week' }),
    }).toEqual({
      second: 'b5a16ab0577f00f9c20010707cf4f0bd25e19852ec3ddb7eb225d6c7ef24d65b',
      minute: '2117c0ce1aebf7da3912a98eb138ab64afad85488e441bb634cfe069604eca03',
      hour: '0e25e637d9d9075678988e77508d935de7e15c0595da0488e972435758359540',
      day: 'c0f2c95e8d82117f5c278217230f6ce6de5c7fc13d52c697d56c9049dad1c6bd',
      week: 'bf394a3b301827a3a4cbc7487fedb23186562b28c3ed86ab8f3447eac066ab63',
    });
  });

  it('S5 an expression hashes by expression and time zone, not by its spacing', () => {
    const berlin = hashOf({ expression: '0 9-17 * * MON-FRI', timeZone: 'Europe/Berlin' });
    expect(hashOf({ expression: ' 0 9-17  * * MON-FRI ', timeZone: 'Europe/Berlin' })).toBe(berlin);
    const others = [
      hashOf({ expression: '0 9-17 * * MON-FRI', timeZone: 'America/New_York' }),
      hashOf({ expression: '0 9-17 * * MON-FRI' }),
      hashOf({ expression: '0 9-18 * * MON-FRI', timeZone: 'Europe/Berlin' }),
      hashOf({ expression: '0 0 * * *' }),
      hashOf({ every: 'day' }),
    ];
    expect(new Set([berlin, ...others]).size).toBe(6);
  });

  it('S3 windowCron refuses a misspelt option, naming it', () => {
    expect(() => Stream.from({ name: 'orders' }).windowCron({ expression: '0 9 * * *', timezone: 'Europe/Berlin' } as any)).toThrow(/unknown option "timezone"/);
    expect(() => Stream.from({ name: 'orders' }).windowCron({ expression: '0 9 * * *', timeZone: 'Berlin' })).toThrow(/timeZone "Berlin"/);
  });
});
