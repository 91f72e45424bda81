// A window plugin written against @queen-mq/core's public interface only:
// nothing here is known to core, the runner treats it like any shipped window.
import { chainError, option, parseWindowPluginOptions, z, type WindowBounds, type WindowOptions, type WindowPlugin } from '@queen-mq/core';

/** Options of {@link calendarMonth}: the time zone plus every window's common options. */
export interface CalendarMonthOptions<T = any> extends WindowOptions<T> {
  /** IANA time zone whose calendar months bucket the events, e.g. `Europe/Berlin`. Default `UTC`. */
  timeZone?: string;
}

/** A month closes once a day at most matters; checking every minute is plenty. */
export const CALENDAR_MONTH_DEFAULT_IDLE_FLUSH_MS = 60_000;

interface LocalDate {
  year: number;
  month: number; // 1..12
}

function formatter(timeZone: string): Intl.DateTimeFormat {
  return new Intl.DateTimeFormat('en-US', {
    timeZone,
    hourCycle: 'h23',
    year: 'numeric',
    month: 'numeric',
    day: 'numeric',
    hour: 'numeric',
    minute: 'numeric',
    second: 'numeric',
  });
}

/** The zone's UTC offset (ms) at an instant: local wall time read as UTC, minus the instant. */
function offsetAt(fmt: Intl.DateTimeFormat, epochMs: number): number {
  const p: Record<string, number> = {};
  for (const part of fmt.formatToParts(new Date(epochMs))) if (part.type !== 'literal') p[part.type] = Number(part.value);
  const wall = Date.UTC(p.year!, p.month! - 1, p.day!, p.hour!, p.minute!, p.second!);
  return wall - Math.floor(epochMs / 1000) * 1000;
}

function localMonth(fmt: Intl.DateTimeFormat, epochMs: number): LocalDate {
  const local = new Date(epochMs + offsetAt(fmt, epochMs));
  return { year: local.getUTCFullYear(), month: local.getUTCMonth() + 1 };
}

/**
 * The instant of local 00:00 on the 1st of a month. The offset at the guess
 * may differ from the offset at the answer (a DST change near midnight), so
 * it is re-read once at the candidate.
 */
function monthStart(fmt: Intl.DateTimeFormat, { year, month }: LocalDate): number {
  const wall = Date.UTC(year, month - 1, 1);
  const first = wall - offsetAt(fmt, wall);
  const second = wall - offsetAt(fmt, first);
  return second;
}

/** The factory's options as one schema: it validates them (an unknown one throws) and renders the README table. */
export const calendarMonthOptionsSchema = z.object({
  timeZone: option(z.string().min(1).optional(), { description: 'IANA time zone whose calendar months bucket the events', rule: 'must be an IANA time zone', default: '"UTC"' }),
});

/**
 * Calendar months in a time zone: `[local 1st 00:00, next local 1st 00:00)`,
 * so a month is 28 to 31 days long and, across a DST change, not a whole
 * number of hours in UTC. State rows are tagged `month:<timeZone>`.
 */
export function calendarMonth(options: Pick<CalendarMonthOptions, 'timeZone'> = {}): WindowPlugin {
  const timeZone = parseWindowPluginOptions('calendarMonth window', calendarMonthOptionsSchema, options).timeZone ?? 'UTC';
  let fmt: Intl.DateTimeFormat;
  try {
    if (typeof timeZone !== 'string' || timeZone === '') throw new RangeError('empty');
    fmt = formatter(timeZone);
  } catch {
    throw chainError(`calendarMonth window: timeZone must be an IANA time zone, got ${JSON.stringify(timeZone)}`);
  }
  const zone = fmt.resolvedOptions().timeZone;
  return Object.freeze({
    kind: 'calendar-month',
    shape: { timeZone: zone },
    tag: `month:${zone}`,
    defaultIdleFlushMs: CALENDAR_MONTH_DEFAULT_IDLE_FLUSH_MS,
    assign(timestampMs: number): WindowBounds[] {
      const m = localMonth(fmt, timestampMs);
      let start = monthStart(fmt, m);
      // Right after a backward DST change the first guess can land one month late or early: step.
      if (start > timestampMs) start = monthStart(fmt, m.month === 1 ? { year: m.year - 1, month: 12 } : { year: m.year, month: m.month - 1 });
      const next = m.month === 12 ? { year: m.year + 1, month: 1 } : { year: m.year, month: m.month + 1 };
      return [{ start, end: monthStart(fmt, next) }];
    },
  });
}
