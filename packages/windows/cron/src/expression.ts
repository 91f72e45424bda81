import { Cron } from 'croner';
import type { WindowBounds } from '@queen-mq/core';

/**
 * Buckets of a cron expression in a time zone: the fire times split the time
 * line into `[fire_i, fire_{i+1})`, so each fire opens a window that lasts
 * until the next fire. Fire times are computed by croner from the platform's
 * time-zone data (Intl); across DST they follow Vixie cron (croner's rule):
 * a fixed-time expression (one value in each of second, minute and hour, e.g.
 * `30 2 * * *`) fires once on a repeated wall time (its first occurrence) and,
 * for a wall time a spring-forward skips, at the first instant after the gap;
 * an interval expression (a wildcard, step, range or list in any of those
 * three, e.g. `0 * * * *`) fires on both occurrences and skips the gap.
 */
interface ExpressionBuckets {
  /** The one bucket containing `timestampMs`. */
  bucketOf(timestampMs: number): WindowBounds;
}

/** What `compileExpression` refuses; the message starts with the option's name. */
export class ExpressionError extends Error {}

// A fixed window for "does it ever fire": never `now`, so validation is
// deterministic. Any expression croner accepts in 5/6-part mode repeats
// within the 400-year Gregorian cycle; a fire in 2000..2100 is the practical
// test (it rejects 30 February and 31 April).
const PROBE_FROM = Date.UTC(2000, 0, 1);
const PROBE_TO = Date.UTC(2100, 0, 1);

/** How many recent buckets `bucketOf` remembers; a batch rarely spans more. */
const RECENT = 8;

/**
 * Parses `expression` (5 fields, or 6 with seconds first; names like MON-FRI
 * and nicknames like @daily; day-of-month and day-of-week OR-ed when both are
 * restricted) for `timeZone` (an IANA name). Throws ExpressionError.
 */
export function compileExpression(expression: string, timeZone: string): ExpressionBuckets {
  try {
    new Cron(expression, { mode: '5-or-6-parts', paused: true });
  } catch (err) {
    throw new ExpressionError(`expression ${JSON.stringify(expression)} is invalid: ${(err as Error).message}`);
  }
  try {
    new Intl.DateTimeFormat('en-US', { timeZone }).format(0);
  } catch {
    throw new ExpressionError(`timeZone ${JSON.stringify(timeZone)} is not a time zone this platform knows (an IANA name such as "Europe/Berlin")`);
  }
  const job = new Cron(expression, { mode: '5-or-6-parts', paused: true, timezone: timeZone });
  let probe: Date | null = null;
  try {
    probe = job.nextRun(new Date(PROBE_FROM));
  } catch (err) {
    throw new ExpressionError(`timeZone ${JSON.stringify(timeZone)} is not usable: ${(err as Error).message}`);
  }
  if (!probe || probe.getTime() >= PROBE_TO) throw new ExpressionError(`expression ${JSON.stringify(expression)} never fires`);

  const recent: WindowBounds[] = [];
  return {
    bucketOf(timestampMs: number): WindowBounds {
      for (const w of recent) if (w.start <= timestampMs && timestampMs < w.end) return { start: w.start, end: w.end };
      // Fire times are whole seconds and previousRuns is strictly before its
      // (second-truncated) reference, so the reference one second past t's
      // second answers the last fire at or before t.
      const second = Math.floor(timestampMs / 1000) * 1000;
      const start = job.previousRuns(1, new Date(second + 1000))[0];
      // The end is the fire after the START, not after t: bucket ends are
      // then by construction the next bucket's start (contiguity).
      const end = start ? job.nextRun(start) : null;
      if (!start || !end || !(start.getTime() <= timestampMs && timestampMs < end.getTime())) {
        throw new Error(`cron window: no bucket of ${JSON.stringify(expression)} in ${timeZone} contains ${new Date(timestampMs).toISOString()}`);
      }
      const w = { start: start.getTime(), end: end.getTime() };
      recent.unshift(w);
      if (recent.length > RECENT) recent.pop();
      return { start: w.start, end: w.end };
    },
  };
}
