import { describe, expect, it } from 'vitest';
import { cron, CRON_UNITS } from './cron.js';

const t = (iso: string) => Date.parse(iso);
const startOf = (every: (typeof CRON_UNITS)[number], iso: string) => cron({ every }).assign(t(iso));

/** The reference: the same bucket computed from UTC calendar fields. */
function calendarStart(every: string, ms: number): number {
  const d = new Date(ms);
  const [y, mo, da, h, mi, s] = [d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate(), d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds()];
  switch (every) {
    case 'second':
      return Date.UTC(y, mo, da, h, mi, s);
    case 'minute':
      return Date.UTC(y, mo, da, h, mi);
    case 'hour':
      return Date.UTC(y, mo, da, h);
    case 'day':
      return Date.UTC(y, mo, da);
    default: {
      const back = (d.getUTCDay() + 6) % 7; // days since Monday
      return Date.UTC(y, mo, da - back);
    }
  }
}

describe('cron window plugin', () => {
  it('S3 every must be one of second|minute|hour|day|week', () => {
    for (const every of ['fortnight', 'month', '', 'Day', 5, undefined]) {
      expect(() => cron({ every: every as any }), String(every)).toThrow(/every must be one of/);
    }
    expect(cron({ every: 'day' })).toMatchObject({ kind: 'cron', tag: 'cron:day', shape: { every: 'day' }, defaultIdleFlushMs: 30000 });
  });

  it('S13 units: second, minute, hour, day; windowEnd = start + one unit', () => {
    expect(startOf('second', '2026-01-05T10:00:35.999Z')).toEqual([{ start: t('2026-01-05T10:00:35.000Z'), end: t('2026-01-05T10:00:36.000Z') }]);
    expect(startOf('minute', '2026-01-05T10:00:35.123Z')).toEqual([{ start: t('2026-01-05T10:00:00.000Z'), end: t('2026-01-05T10:01:00.000Z') }]);
    expect(startOf('hour', '2026-01-05T10:30:35.000Z')).toEqual([{ start: t('2026-01-05T10:00:00.000Z'), end: t('2026-01-05T11:00:00.000Z') }]);
    expect(startOf('day', '2026-01-05T22:30:35.000Z')).toEqual([{ start: t('2026-01-05T00:00:00.000Z'), end: t('2026-01-06T00:00:00.000Z') }]);
  });

  it('S14 weeks start Monday 00:00 UTC', () => {
    const week = [{ start: t('2026-01-05T00:00:00.000Z'), end: t('2026-01-12T00:00:00.000Z') }];
    expect(startOf('week', '2026-01-07T12:00:00.000Z')).toEqual(week);
    expect(startOf('week', '2026-01-11T23:59:59.999Z')).toEqual(week);
    expect(startOf('week', '2026-01-12T00:00:00.000Z')).toEqual([{ start: t('2026-01-12T00:00:00.000Z'), end: t('2026-01-19T00:00:00.000Z') }]);
  });

  it('boundaries across month and year ends, the leap day 2028-02-29, and weeks spanning a year end', () => {
    expect(startOf('day', '2028-02-29T23:59:59.999Z')).toEqual([{ start: t('2028-02-29T00:00:00.000Z'), end: t('2028-03-01T00:00:00.000Z') }]);
    expect(startOf('day', '2028-03-01T00:00:00.000Z')[0]!.start).toBe(t('2028-03-01T00:00:00.000Z'));
    expect(startOf('hour', '2026-12-31T23:59:59.999Z')).toEqual([{ start: t('2026-12-31T23:00:00.000Z'), end: t('2027-01-01T00:00:00.000Z') }]);
    expect(startOf('second', '2026-01-31T23:59:59.500Z')[0]!.end).toBe(t('2026-02-01T00:00:00.000Z'));
    // 2026-12-28 is a Monday; its week runs into 2027
    expect(startOf('week', '2027-01-01T08:00:00.000Z')).toEqual([{ start: t('2026-12-28T00:00:00.000Z'), end: t('2027-01-04T00:00:00.000Z') }]);
    // the week holding the leap day: Mon 2028-02-28 .. Mon 2028-03-06
    expect(startOf('week', '2028-02-29T12:00:00.000Z')).toEqual([{ start: t('2028-02-28T00:00:00.000Z'), end: t('2028-03-06T00:00:00.000Z') }]);
    expect(new Date(startOf('week', '1970-01-01T00:00:00.000Z')[0]!.start).toISOString()).toBe('1969-12-29T00:00:00.000Z');
  });

  it('assignment property: random instants fall in the calendar bucket computed from UTC fields', () => {
    let x = 7;
    for (let i = 0; i < 2000; i++) {
      x = (x * 1103515245 + 12345) % 2147483648;
      const ms = Math.floor((x / 2147483648) * 4.1e12) - 1e11; // 1966 .. 2096
      for (const every of CRON_UNITS) {
        const [w] = cron({ every }).assign(ms);
        expect(w!.start, `${every} ${new Date(ms).toISOString()}`).toBe(calendarStart(every, ms));
        expect(w!.start <= ms && ms < w!.end).toBe(true);
        if (every === 'week') expect(new Date(w!.start).getUTCDay()).toBe(1);
      }
    }
  });
});
