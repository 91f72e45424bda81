import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { Queen, Stream } from 'queen-mq';
import { calendarMonth } from './calendar-month.js';

const t = (iso: string) => Date.parse(iso);

describe('calendarMonth window plugin (custom, core interface only)', () => {
  it('rejects an unknown time zone; tag and shape carry the zone', () => {
    expect(() => calendarMonth({ timeZone: 'Mars/Olympus' })).toThrow(/timeZone must be an IANA time zone/);
    expect(() => calendarMonth({ timezone: 'UTC' } as any)).toThrow(/unknown option "timezone" \(did you mean "timeZone"\?\); accepted: timeZone/);
    expect(calendarMonth({ timeZone: 'Europe/Berlin' })).toMatchObject({ kind: 'calendar-month', tag: 'month:Europe/Berlin', shape: { timeZone: 'Europe/Berlin' } });
  });

  it('months in Europe/Berlin start at local midnight: 23:00Z in winter, 22:00Z in summer', () => {
    const w = calendarMonth({ timeZone: 'Europe/Berlin' });
    // 2026-01-31T23:30Z is already February 1st in Berlin
    expect(w.assign(t('2026-01-31T23:30:00Z'))).toEqual([{ start: t('2026-01-31T23:00:00Z'), end: t('2026-02-28T23:00:00Z') }]);
    expect(w.assign(t('2026-01-31T22:59:59.999Z'))[0]!.start).toBe(t('2025-12-31T23:00:00Z'));
    // March holds the spring-forward change: it ends at 22:00Z (CEST)
    expect(w.assign(t('2026-03-15T12:00:00Z'))).toEqual([{ start: t('2026-02-28T23:00:00Z'), end: t('2026-03-31T22:00:00Z') }]);
    // the leap February of 2028 is 29 days
    const feb = w.assign(t('2028-02-29T12:00:00Z'))[0]!;
    expect((feb.end - feb.start) / 86_400_000).toBe(29);
  });

  it('property: random instants fall in the month whose local calendar contains them', () => {
    for (const timeZone of ['UTC', 'Europe/Berlin', 'America/New_York', 'Asia/Kolkata', 'Australia/Sydney']) {
      const w = calendarMonth({ timeZone });
      const fmt = new Intl.DateTimeFormat('en-CA', { timeZone, year: 'numeric', month: '2-digit' });
      let x = 11;
      for (let i = 0; i < 300; i++) {
        x = (x * 1103515245 + 12345) % 2147483648;
        const ms = t('2020-01-01T00:00:00Z') + Math.floor((x / 2147483648) * 3.2e11);
        const [win] = w.assign(ms);
        expect(win!.start <= ms && ms < win!.end, `${timeZone} ${new Date(ms).toISOString()}`).toBe(true);
        expect(fmt.format(win!.start)).toBe(fmt.format(ms));
        expect(fmt.format(win!.end - 1)).toBe(fmt.format(ms));
        expect(fmt.format(win!.end)).not.toBe(fmt.format(ms));
      }
    }
  });
});

describe('calendarMonth over a real broker', () => {
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

  it('revenue per customer per Berlin month: the January window closes when a February event arrives', async () => {
    const src = uniqueName('cm-src');
    const sink = uniqueName('cm-sink');
    expect((await b.http('POST', '/api/v1/configure', { queue: src, options: { leaseTime: 2, retryLimit: 100 } })).status).toBe(200);
    const h = await Stream.from(queen.queue(src))
      .keyBy((m) => m.data.customer)
      .window(calendarMonth({ timeZone: 'Europe/Berlin' }), { idleFlushMs: 0, eventTime: (m) => m.data.ts })
      .aggregate({ count: () => 1, sum: (o) => o.amount })
      .map((agg, ctx) => ({ customer: ctx.key, month: new Date(ctx.windowStart!).toISOString(), ...agg }))
      .to(queen.queue(sink))
      .run({ queryId: uniqueName('cm'), url: b.url, batchSize: 50, maxWaitMillis: 300 });
    try {
      const items = [
        { customer: 'acme', ts: '2026-01-01T00:30:00+01:00', amount: 10 },
        { customer: 'acme', ts: '2026-01-31T23:59:00+01:00', amount: 5 },
        { customer: 'acme', ts: '2026-01-31T23:30:00Z', amount: 100 }, // Feb 1st 00:30 in Berlin
      ];
      expect((await b.http('POST', '/api/v1/push', { items: items.map((payload) => ({ queue: src, payload })) })).status).toBe(201);
      const got: any[] = [];
      await eventually(async () => {
        const res = await b.http('GET', `/api/v1/pop/queue/${sink}?batch=10&wait=true&timeout=300&autoAck=true&consumerGroup=check`);
        if (res.status === 200) got.push(...res.body.messages.map((m: any) => m.data));
        return got.length >= 1;
      }, 8000);
      expect(got).toEqual([{ customer: 'acme', month: '2025-12-31T23:00:00.000Z', count: 2, sum: 15 }]);
    } finally {
      await h.stop();
    }
  });
});
