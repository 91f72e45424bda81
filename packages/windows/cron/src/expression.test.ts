import { describe, expect, it } from 'vitest';
import { cron } from './cron.js';

// Cron expressions in a time zone. The oracle below does not ask croner: it
// reads wall-clock fields from Intl and applies the documented rules, so the
// properties check croner and the bucket code against the platform's zone data.

const t = (iso: string) => Date.parse(iso);
const iso = (ms: number) => new Date(ms).toISOString();
const MIN = 60_000;
const HOUR = 3_600_000;

const formatters = new Map<string, Intl.DateTimeFormat>();
const walls = new Map<string, ReturnType<typeof readWall>>();
/** Wall-clock fields of `ms` in `tz` (weekday 0 = Sunday). */
function wall(ms: number, tz: string) {
  const key = `${tz} ${ms}`;
  let w = walls.get(key);
  if (!w) walls.set(key, (w = readWall(ms, tz)));
  return w;
}
function readWall(ms: number, tz: string) {
  let f = formatters.get(tz);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', { timeZone: tz, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric', weekday: 'short' });
    formatters.set(tz, f);
  }
  const p = Object.fromEntries(f.formatToParts(ms).map((x) => [x.type, x.value]));
  return {
    year: +p.year!,
    month: +p.month!,
    day: +p.day!,
    hour: +p.hour!,
    minute: +p.minute!,
    second: +p.second!,
    weekday: ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'].indexOf(p.weekday!),
  };
}
const wallKey = (ms: number, tz: string) => JSON.stringify(wall(ms, tz));

/** A tiny reference matcher for the field forms the cases use: `*`, `n`, `a-b`, `a,b`, `*\/s`. */
function fieldMatches(field: string, value: number): boolean {
  return field.split(',').some((part) => {
    const [range, step] = part.split('/');
    const [lo, hi] = range === '*' ? [0, 99] : range!.includes('-') ? range!.split('-').map(Number) : [Number(range), Number(range)];
    return value >= lo! && value <= hi! && (value - (range === '*' ? 0 : lo!)) % Number(step ?? 1) === 0;
  });
}

interface Case {
  expression: string; // 5 fields, numeric
  timeZone: string;
  from: string;
  to: string;
}

/**
 * Properties over every minute of [from, to): each minute lies in exactly one
 * bucket, consecutive buckets touch, bucket starts are fire times and no fire
 * time lies strictly inside a bucket. A fire time, per the README: the wall
 * clock matches, except that a fixed-time expression fires only on the first
 * of two equal wall times (fall back), and fires at the end of a gap that
 * skipped a matching wall time (spring forward).
 */
function checkCase(c: Case) {
  const w = cron({ expression: c.expression, timeZone: c.timeZone });
  const [mi, ho, dom, mon, dow] = c.expression.split(' ') as [string, string, string, string, string];
  const fixed = /^\d+$/.test(mi) && /^\d+$/.test(ho);
  const wallMatches = (ms: number) => {
    const f = wall(ms, c.timeZone);
    return f.second === 0 && fieldMatches(mi, f.minute) && fieldMatches(ho, f.hour) && fieldMatches(dom, f.day) && fieldMatches(mon, f.month) && fieldMatches(dow, f.weekday);
  };
  const repeated = (ms: number) => wallKey(ms - HOUR, c.timeZone) === wallKey(ms, c.timeZone);
  const minuteOfDay = (ms: number) => wall(ms, c.timeZone).hour * 60 + wall(ms, c.timeZone).minute;
  // the first instant after a spring-forward gap that skipped the fixed time, on a matching day
  const firesAfterGap = (ms: number) => {
    const before = minuteOfDay(ms - MIN);
    const now = minuteOfDay(ms);
    const target = Number(ho) * 60 + Number(mi);
    const f = wall(ms, c.timeZone);
    return now - before > 1 && before < target && target < now && fieldMatches(dom, f.day) && fieldMatches(mon, f.month) && fieldMatches(dow, f.weekday);
  };
  const fires = (ms: number) => (wallMatches(ms) && !(fixed && repeated(ms))) || (fixed && firesAfterGap(ms));
  const from = t(c.from);
  const to = t(c.to);
  // plain checks in the loop (an expect() per minute is most of the run time)
  const problems: string[] = [];
  let prev = w.assign(from)[0]!;
  if (!(prev.start <= from)) problems.push(`first bucket starts after ${c.from}`);
  let buckets = 1;
  for (let ms = from; ms < to; ms += MIN) {
    const all = w.assign(ms);
    const b = all[0]!;
    if (all.length !== 1) problems.push(`${iso(ms)} is in ${all.length} buckets`);
    if (!(b.start <= ms && ms < b.end)) problems.push(`${iso(ms)} not in [${iso(b.start)}, ${iso(b.end)})`);
    if (b.start !== prev.start) {
      // contiguous and non-overlapping: the next bucket starts where the last ended
      if (b.start !== prev.end) problems.push(`[${iso(b.start)}, …) does not start at the end of [${iso(prev.start)}, ${iso(prev.end)})`);
      buckets++;
    } else if (b.end !== prev.end) {
      problems.push(`two ends for the bucket starting ${iso(b.start)}`);
    }
    // bounds are fire times; nothing inside fires
    if (ms === b.start && !fires(ms)) problems.push(`start ${iso(ms)} is not a fire time`);
    if (ms !== b.start && fires(ms)) problems.push(`fire time ${iso(ms)} inside [${iso(b.start)}, ${iso(b.end)})`);
    // fire times are whole minutes: the rest of the minute lands in the same bucket
    const late = w.assign(ms + 59_999)[0]!;
    if (late.start !== b.start || late.end !== b.end) problems.push(`${iso(ms + 59_999)} left the bucket of ${iso(ms)}`);
    prev = b;
  }
  const last = w.assign(to - 1)[0]!;
  if (!(fires(last.end) || last.end > to)) problems.push(`end ${iso(last.end)} is not a fire time`);
  expect(problems, `${c.expression} in ${c.timeZone}`).toEqual([]);
  return buckets;
}

/** Buckets as ISO pairs covering [from, to). */
function bucketsOf(expression: string, timeZone: string, from: string, to: string): string[][] {
  const w = cron({ expression, timeZone });
  const out: string[][] = [];
  for (let ms = t(from); ms < t(to); ) {
    const [b] = w.assign(ms);
    out.push([iso(b!.start), iso(b!.end)]);
    ms = b!.end;
  }
  return out;
}

const hours = (b: string[]) => (t(b[1]!) - t(b[0]!)) / HOUR;

describe('cron expression windows', () => {
  it('business hours in Berlin: each fire time opens a window until the next one, the evening and the weekend included', () => {
    const w = cron({ expression: '0 9-17 * * MON-FRI', timeZone: 'Europe/Berlin' });
    expect(w).toMatchObject({ kind: 'cron', tag: 'cron:0 9-17 * * MON-FRI@Europe/Berlin', shape: { expression: '0 9-17 * * MON-FRI', timeZone: 'Europe/Berlin' }, defaultIdleFlushMs: 30000 });
    // Friday 2026-03-27 (CET, +01:00): 16:00 local = 15:00Z
    expect(w.assign(t('2026-03-27T15:59:59.999Z'))).toEqual([{ start: t('2026-03-27T15:00:00Z'), end: t('2026-03-27T16:00:00Z') }]);
    // 17:00 Friday opens the window that lasts to 09:00 Monday, which is CEST (+02:00) after the switch on Sunday
    expect(w.assign(t('2026-03-28T12:00:00Z'))).toEqual([{ start: t('2026-03-27T16:00:00Z'), end: t('2026-03-30T07:00:00Z') }]);
    expect(w.assign(t('2026-03-30T07:00:00Z'))).toEqual([{ start: t('2026-03-30T07:00:00Z'), end: t('2026-03-30T08:00:00Z') }]);
  });

  it('a 23-hour and a 25-hour day in Europe/Berlin (2026-03-29, 2026-10-25)', () => {
    expect(bucketsOf('0 0 * * *', 'Europe/Berlin', '2026-03-28T23:00:00Z', '2026-03-29T22:00:00Z')).toEqual([['2026-03-28T23:00:00.000Z', '2026-03-29T22:00:00.000Z']]);
    expect(bucketsOf('0 0 * * *', 'Europe/Berlin', '2026-10-24T22:00:00Z', '2026-10-25T23:00:00Z')).toEqual([['2026-10-24T22:00:00.000Z', '2026-10-25T23:00:00.000Z']]);
    expect(hours(bucketsOf('0 0 * * *', 'Europe/Berlin', '2026-03-29T12:00:00Z', '2026-03-29T12:00:01Z')[0]!)).toBe(23);
    expect(hours(bucketsOf('0 0 * * *', 'Europe/Berlin', '2026-10-25T12:00:00Z', '2026-10-25T12:00:01Z')[0]!)).toBe(25);
    // hourly: 23 one-hour buckets on the short day, 25 on the long one (02:00 CEST and 02:00 CET both open one)
    const spring = bucketsOf('0 * * * *', 'Europe/Berlin', '2026-03-28T23:00:00Z', '2026-03-29T22:00:00Z');
    expect(spring).toHaveLength(23);
    expect(spring.every((b) => hours(b) === 1)).toBe(true);
    const autumn = bucketsOf('0 * * * *', 'Europe/Berlin', '2026-10-24T22:00:00Z', '2026-10-25T23:00:00Z');
    expect(autumn).toHaveLength(25);
    expect(autumn.slice(1, 4)).toEqual([
      ['2026-10-24T23:00:00.000Z', '2026-10-25T00:00:00.000Z'], // 01:00 CEST
      ['2026-10-25T00:00:00.000Z', '2026-10-25T01:00:00.000Z'], // 02:00 CEST
      ['2026-10-25T01:00:00.000Z', '2026-10-25T02:00:00.000Z'], // 02:00 CET
    ]);
  });

  it('a fixed time on DST days: 02:30 Berlin fires after the gap in spring and once in autumn', () => {
    // 2026-03-29 02:30 does not exist: the fire is at 03:00 CEST (01:00Z)
    expect(bucketsOf('30 2 * * *', 'Europe/Berlin', '2026-03-28T01:30:00Z', '2026-03-30T00:30:00Z')).toEqual([
      ['2026-03-28T01:30:00.000Z', '2026-03-29T01:00:00.000Z'],
      ['2026-03-29T01:00:00.000Z', '2026-03-30T00:30:00.000Z'],
    ]);
    // 2026-10-25 02:30 happens twice: the first one (CEST, 00:30Z) fires, the day is 25 h
    expect(bucketsOf('30 2 * * *', 'Europe/Berlin', '2026-10-24T00:30:00Z', '2026-10-26T01:30:00Z')).toEqual([
      ['2026-10-24T00:30:00.000Z', '2026-10-25T00:30:00.000Z'],
      ['2026-10-25T00:30:00.000Z', '2026-10-26T01:30:00.000Z'],
    ]);
  });

  it('America/New_York (2026-03-08, 2026-11-01) and the half-hour zones Asia/Kolkata and Australia/Adelaide', () => {
    expect(hours(bucketsOf('0 0 * * *', 'America/New_York', '2026-03-08T12:00:00Z', '2026-03-08T12:00:01Z')[0]!)).toBe(23);
    expect(bucketsOf('0 0 * * *', 'America/New_York', '2026-11-01T12:00:00Z', '2026-11-01T12:00:01Z')).toEqual([['2026-11-01T04:00:00.000Z', '2026-11-02T05:00:00.000Z']]);
    expect(bucketsOf('0 9 * * *', 'Asia/Kolkata', '2026-06-01T04:00:00Z', '2026-06-01T04:00:01Z')).toEqual([['2026-06-01T03:30:00.000Z', '2026-06-02T03:30:00.000Z']]);
    // Adelaide: +10:30 until 2026-04-05 03:00, then +09:30; +10:30 again from 2026-10-04 02:00
    expect(bucketsOf('0 0 * * *', 'Australia/Adelaide', '2026-04-05T12:00:00Z', '2026-04-05T12:00:01Z')).toEqual([['2026-04-04T13:30:00.000Z', '2026-04-05T14:30:00.000Z']]);
    expect(bucketsOf('0 0 * * *', 'Australia/Adelaide', '2026-10-04T12:00:00Z', '2026-10-04T12:00:01Z')).toEqual([['2026-10-03T14:30:00.000Z', '2026-10-04T13:30:00.000Z']]);
    expect(bucketsOf('0 * * * *', 'Australia/Adelaide', '2026-04-04T13:30:00Z', '2026-04-05T14:30:00Z')).toHaveLength(25);
    expect(bucketsOf('0 * * * *', 'Australia/Adelaide', '2026-10-03T14:30:00Z', '2026-10-04T13:30:00Z')).toHaveLength(23);
  });

  it('leap days: 2028-02-29 is a day of its own, February 2028 has 29 of them, and 29 February recurs after four years', () => {
    expect(bucketsOf('0 0 * * *', 'Europe/Berlin', '2028-02-29T12:00:00Z', '2028-02-29T12:00:01Z')).toEqual([['2028-02-28T23:00:00.000Z', '2028-02-29T23:00:00.000Z']]);
    expect(bucketsOf('0 0 1 * *', 'UTC', '2028-02-10T00:00:00Z', '2028-02-10T00:00:01Z')).toEqual([['2028-02-01T00:00:00.000Z', '2028-03-01T00:00:00.000Z']]);
    expect(bucketsOf('0 0 29 2 *', 'UTC', '2029-06-01T00:00:00Z', '2029-06-01T00:00:01Z')).toEqual([['2028-02-29T00:00:00.000Z', '2032-02-29T00:00:00.000Z']]);
    expect(bucketsOf('0 12 * * *', 'America/New_York', '2028-02-28T17:00:00Z', '2028-03-01T17:00:00Z')).toEqual([
      ['2028-02-28T17:00:00.000Z', '2028-02-29T17:00:00.000Z'],
      ['2028-02-29T17:00:00.000Z', '2028-03-01T17:00:00.000Z'],
    ]);
  });

  it('property: every minute around each DST change and leap day lies in exactly one contiguous bucket bounded by fire times', () => {
    const cases: Case[] = [];
    const spans: [string, string, string][] = [
      // about a day and a half around each change (the change at local 02:00 or 03:00)
      ['Europe/Berlin', '2026-03-28T12:00:00Z', '2026-03-30T00:00:00Z'],
      ['Europe/Berlin', '2026-10-24T12:00:00Z', '2026-10-26T00:00:00Z'],
      ['America/New_York', '2026-03-07T18:00:00Z', '2026-03-09T06:00:00Z'],
      ['America/New_York', '2026-10-31T18:00:00Z', '2026-11-02T06:00:00Z'],
      ['Australia/Adelaide', '2026-04-04T00:00:00Z', '2026-04-05T12:00:00Z'],
      ['Australia/Adelaide', '2026-10-03T00:00:00Z', '2026-10-04T12:00:00Z'],
      ['Asia/Kolkata', '2028-02-28T12:00:00Z', '2028-03-01T00:00:00Z'],
      ['UTC', '2028-02-28T12:00:00Z', '2028-03-01T00:00:00Z'],
    ];
    const expressions = ['0 * * * *', '*/20 * * * *', '30 2 * * *', '0 0 * * *', '0 9-17 * * 1-5', '15 1,2,3 * * *', '0 2 * * *'];
    for (const [timeZone, from, to] of spans) for (const expression of expressions) cases.push({ expression, timeZone, from, to });
    let total = 0;
    for (const c of cases) total += checkCase(c);
    expect(total).toBeGreaterThan(500);
  });

  it('property: random instants from 1990 to 2060 land in a bucket whose ends are fire times and whose successor starts at its end', () => {
    const zones = ['Europe/Berlin', 'America/New_York', 'Australia/Adelaide', 'Asia/Kolkata'];
    const windows = zones.map((timeZone) => cron({ expression: '0 */6 * * *', timeZone }));
    let x = 11;
    for (let i = 0; i < 600; i++) {
      x = (x * 1103515245 + 12345) % 2147483648;
      const ms = t('1990-01-01T00:00:00Z') + Math.floor((x / 2147483648) * 70 * 365.25 * 86_400_000);
      const w = windows[i % zones.length]!;
      const tz = zones[i % zones.length]!;
      const [b] = w.assign(ms);
      expect(b!.start <= ms && ms < b!.end).toBe(true);
      for (const edge of [b!.start, b!.end]) {
        const f = wall(edge, tz);
        // every 6 hours on the hour; a 6-hourly bucket holding a DST change is 5 or 7 hours long
        expect([f.minute, f.second, f.hour % 6], `${tz} ${iso(edge)}`).toEqual([0, 0, 0]);
      }
      expect([5, 6, 7]).toContain((b!.end - b!.start) / HOUR);
      expect(w.assign(b!.end)[0]!.start).toBe(b!.end);
      expect(w.assign(b!.start - 1)[0]!.end).toBe(b!.start);
    }
  });

  it('S3 option errors name the option', () => {
    const bad: [object, RegExp][] = [
      [{ expression: '0 9 * * *', timezone: 'UTC' }, /cron window: unknown option "timezone" \(did you mean "timeZone"\?\)/],
      [{ expression: '0 9 * * *', every: 'day' }, /every and expression are exclusive/],
      [{ every: 'day', timeZone: 'Europe/Berlin' }, /timeZone requires expression/],
      [{ expression: '61 * * * *' }, /expression "61 \* \* \* \*" is invalid/],
      [{ expression: 'every day' }, /expression "every day" is invalid/],
      [{ expression: '0 0 * * * * 2030' }, /expression .* is invalid/],
      [{ expression: '0 0 30 2 *' }, /expression "0 0 30 2 \*" never fires/],
      [{ expression: '' }, /expression must be a non-empty string/],
      [{ expression: 5 }, /expression must be a non-empty string/],
      [{ expression: '0 9 * * *', timeZone: 'Europe/Berlln' }, /timeZone "Europe\/Berlln" is not a time zone/],
      [{ expression: '0 9 * * *', timeZone: '' }, /timeZone must be an IANA time zone name/],
      [{ expression: '0 9 * * *', timeZone: 1 }, /timeZone must be an IANA time zone name/],
      [{}, /every must be one of/],
    ];
    for (const [options, message] of bad) {
      expect(() => cron(options as any), JSON.stringify(options)).toThrow(message);
      try {
        cron(options as any);
      } catch (err) {
        expect((err as { code?: string }).code).toBe('VALIDATION_FAILED');
      }
    }
    // the common window options are .window()'s, never cron()'s: one given here would be dropped, so it throws
    for (const common of [{ gracePeriod: 5 }, { idleFlushMs: 0 }, { allowedLateness: 1 }, { onLate: 'include' }, { eventTime: () => 0 }]) {
      expect(() => cron({ expression: '0 9 * * *', ...common } as any), Object.keys(common)[0]).toThrow(/is an option of the window call, not of the plugin/);
    }
  });

  it('timeZone defaults to UTC; whitespace in the expression does not change the shape or the tag', () => {
    expect(cron({ expression: ' 0  9 * *   *' })).toMatchObject({ shape: { expression: '0 9 * * *', timeZone: 'UTC' }, tag: 'cron:0 9 * * *@UTC' });
    expect(cron({ expression: '0 9 * * *' }).assign(t('2026-06-01T08:59:59.999Z'))).toEqual([{ start: t('2026-05-31T09:00:00Z'), end: t('2026-06-01T09:00:00Z') }]);
    // 6 fields: seconds first
    expect(cron({ expression: '*/15 * * * * *' }).assign(t('2026-06-01T08:59:59.999Z'))).toEqual([{ start: t('2026-06-01T08:59:45Z'), end: t('2026-06-01T09:00:00Z') }]);
  });
});
