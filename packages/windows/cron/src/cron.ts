import { chainError, type WindowBounds, type WindowOptions, type WindowPlugin } from '@queen-mq/core';

/** Calendar units a cron window can bucket on. */
export const CRON_UNITS = ['second', 'minute', 'hour', 'day', 'week'] as const;
export type CronUnit = (typeof CRON_UNITS)[number];

/** Options of {@link cron}: the unit plus every window's common options. */
export interface CronOptions<T = any> extends WindowOptions<T> {
  every: CronUnit;
}

/** Idle-flush interval when the options omit `idleFlushMs` (ms). */
export const CRON_DEFAULT_IDLE_FLUSH_MS = 30000;

const UNIT_MS: Record<CronUnit, number> = {
  second: 1000,
  minute: 60_000,
  hour: 3_600_000,
  day: 86_400_000,
  week: 7 * 86_400_000,
};

/**
 * Where unit buckets are anchored. UTC has no leap seconds in epoch time and
 * no DST, so seconds to days are plain epoch multiples; weeks are anchored on
 * Monday 1970-01-05T00:00Z (the epoch itself was a Thursday).
 */
const ANCHOR_MS: Record<CronUnit, number> = { second: 0, minute: 0, hour: 0, day: 0, week: 4 * 86_400_000 };

/**
 * Wall-clock aligned buckets in UTC: `[start of the unit containing t, start
 * of the next)`. State rows are tagged `cron:<every>`. Throws
 * (VALIDATION_FAILED) for any `every` outside second|minute|hour|day|week.
 */
export function cron(options: Pick<CronOptions, 'every'>): WindowPlugin {
  const every = (options as { every?: unknown } | undefined)?.every;
  if (typeof every !== 'string' || !(CRON_UNITS as readonly string[]).includes(every)) {
    throw chainError(`cron window: every must be one of ${CRON_UNITS.join(', ')}, got ${JSON.stringify(every)}`);
  }
  const unit = every as CronUnit;
  const size = UNIT_MS[unit];
  const anchor = ANCHOR_MS[unit];
  return Object.freeze({
    kind: 'cron',
    shape: { every: unit },
    tag: `cron:${unit}`,
    defaultIdleFlushMs: CRON_DEFAULT_IDLE_FLUSH_MS,
    assign(timestampMs: number): WindowBounds[] {
      const start = Math.floor((timestampMs - anchor) / size) * size + anchor;
      return [{ start, end: start + size }];
    },
  });
}
