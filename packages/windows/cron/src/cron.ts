import { chainError, option, parseWindowPluginOptions, windowOptionsSchema, z, type WindowBounds, type WindowOptions, type WindowPlugin } from '@queen-mq/core';
import { compileExpression, ExpressionError } from './expression.js';

/** Calendar units a cron window can bucket on. */
export const CRON_UNITS = ['second', 'minute', 'hour', 'day', 'week'] as const;
export type CronUnit = (typeof CRON_UNITS)[number];

/** Fixed UTC units: `cron({ every: 'day' })`. */
export interface CronUnitOptions<T = any> extends WindowOptions<T> {
  every: CronUnit;
  expression?: never;
  timeZone?: never;
}

/**
 * A cron expression in a time zone: `cron({ expression: '0 9-17 * * MON-FRI',
 * timeZone: 'Europe/Berlin' })`. Each fire time opens a window that lasts
 * until the next fire time.
 */
export interface CronExpressionOptions<T = any> extends WindowOptions<T> {
  /** 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds first; names (MON, JAN) and @daily-style nicknames allowed. */
  expression: string;
  /** IANA time zone the expression is read in, e.g. `'Europe/Berlin'`. Default `'UTC'`. */
  timeZone?: string;
  every?: never;
}

/** Options of {@link cron}: a unit or an expression, plus every window's common options. */
export type CronOptions<T = any> = CronUnitOptions<T> | CronExpressionOptions<T>;

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

/** What `cron()` itself takes; the common window options go to `.window()`. Which of every/expression is given is checked by `cron()`. */
const cronPluginSchema = z.object({
  every: option(z.enum(CRON_UNITS).optional(), {
    description: 'A UTC unit: buckets of one second, minute, hour, day or week (weeks start Monday)',
    rule: `must be one of ${CRON_UNITS.join(', ')}`,
  }),
  expression: option(z.string().min(1).optional(), {
    description: 'A cron expression (5 fields, or 6 with seconds first): each fire time opens a window until the next one',
    rule: 'must be a non-empty string',
  }),
  timeZone: option(z.string().min(1).optional(), {
    description: 'The IANA time zone the expression is read in',
    rule: 'must be an IANA time zone name',
    default: '"UTC"',
  }),
});

/** {@link CronOptions} as a schema: validates `.windowCron()` and renders the options table. */
export const cronOptionsSchema = windowOptionsSchema.extend(cronPluginSchema.shape);

/**
 * A cron window. Either fixed UTC units, `{ every }` (`[start of the unit
 * containing t, start of the next)`, state rows tagged `cron:<every>`), or a
 * cron expression in a time zone, `{ expression, timeZone? }` (`[last fire
 * time at or before t, next fire time)`, tagged `cron:<expression>@<timeZone>`).
 * Throws (VALIDATION_FAILED, naming the option) for an unknown option, both
 * or neither of every/expression, an `every` outside
 * second|minute|hour|day|week, an expression croner rejects or that never
 * fires, a time zone Intl does not know, and a common window option
 * (`idleFlushMs`, …): those go to `.window(cron({ … }), { … })` or to
 * `.windowCron()`.
 */
export function cron(options: Pick<CronUnitOptions, 'every'> | Pick<CronExpressionOptions, 'expression' | 'timeZone'>): WindowPlugin {
  const o = parseWindowPluginOptions('cron window', cronPluginSchema, options);
  if (o.expression !== undefined) {
    if (o.every !== undefined) throw chainError('cron window: every and expression are exclusive, pass one');
    return expressionWindow(o.expression, o.timeZone);
  }
  if (o.timeZone !== undefined) throw chainError('cron window: timeZone requires expression (every is always UTC)');
  if (o.every === undefined) throw chainError(`cron window: every must be one of ${CRON_UNITS.join(', ')}, got undefined (or pass expression)`);
  return unitWindow(o.every);
}

function unitWindow(unit: CronUnit): WindowPlugin {
  const size = UNIT_MS[unit];
  const anchor = ANCHOR_MS[unit];
  // shape and tag are what stored state and config hashes depend on: unchanged since 0.1.0.
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

function expressionWindow(rawExpression: string, rawTimeZone: string | undefined): WindowPlugin {
  if (rawExpression.trim() === '') throw chainError(`cron window: expression must be a non-empty string, got ${JSON.stringify(rawExpression)}`);
  // Whitespace is normalised so that spacing never changes the hash; the
  // time zone is kept as written (Intl's canonical names differ between ICU
  // versions, and a redeploy on a newer Node must not change the hash).
  const expression = rawExpression.trim().split(/\s+/).join(' ');
  const timeZone = rawTimeZone ?? 'UTC';
  let buckets;
  try {
    buckets = compileExpression(expression, timeZone);
  } catch (err) {
    if (err instanceof ExpressionError) throw chainError(`cron window: ${err.message}`);
    throw err;
  }
  return Object.freeze({
    kind: 'cron',
    shape: { expression, timeZone },
    tag: `cron:${expression}@${timeZone}`,
    defaultIdleFlushMs: CRON_DEFAULT_IDLE_FLUSH_MS,
    assign(timestampMs: number): WindowBounds[] {
      return [buckets.bucketOf(timestampMs)];
    },
  });
}
