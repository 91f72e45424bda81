import { Cron } from 'croner';
import { QueenError, SCHEDULE_MAX_CATCH_UP, type ScheduleMissed } from '@queen-mq/protocol';

// The fire times of a schedule: croner (the library the cron window of
// @queen-mq/window-cron uses) in an IANA zone, read from the platform's
// time-zone data (Intl). Across DST croner follows Vixie cron: a fixed wall
// time that a spring-forward skips fires at the first instant after the gap,
// a repeated one fires once; interval expressions skip the gap and fire on
// both repeated hours.

/** A compiled schedule clock. Fire times are whole seconds. */
export type ScheduleClock = Cron;

// "Does it ever fire" is asked over a fixed window, never from now, so the
// answer does not depend on the day (30 February never fires; any real
// expression fires within a century).
const PROBE_FROM = new Date(Date.UTC(2000, 0, 1));
const PROBE_TO = Date.UTC(2100, 0, 1);

/** Parses `cron` for `timeZone`; throws SCHEDULE_INVALID_CRON / SCHEDULE_INVALID_TIME_ZONE (400) naming the field. */
export function compileSchedule(cron: string, timeZone: string): ScheduleClock {
  const invalid = (code: 'SCHEDULE_INVALID_CRON' | 'SCHEDULE_INVALID_TIME_ZONE', field: string, message: string) =>
    new QueenError(code, undefined, { details: [{ field, message }] });
  try {
    new Cron(cron, { mode: '5-or-6-parts', paused: true });
  } catch (err) {
    throw invalid('SCHEDULE_INVALID_CRON', 'body.cron', (err as Error).message);
  }
  try {
    new Intl.DateTimeFormat('en-US', { timeZone }).format(0);
  } catch {
    throw invalid('SCHEDULE_INVALID_TIME_ZONE', 'body.timeZone', `${JSON.stringify(timeZone)} is not an IANA time zone this platform knows`);
  }
  const clock = new Cron(cron, { mode: '5-or-6-parts', paused: true, timezone: timeZone });
  let probe: Date | null;
  try {
    probe = clock.nextRun(PROBE_FROM);
  } catch (err) {
    throw invalid('SCHEDULE_INVALID_TIME_ZONE', 'body.timeZone', (err as Error).message);
  }
  if (!probe || probe.getTime() >= PROBE_TO) throw invalid('SCHEDULE_INVALID_CRON', 'body.cron', 'never fires');
  return clock;
}

/** Stored as next_fire_at when an expression has no fire time left (croner answers none). */
const NEVER = new Date(Date.UTC(9999, 11, 31));

/** The first fire time strictly after `t`. */
export function fireAfter(clock: ScheduleClock, t: Date): Date {
  return clock.nextRun(t) ?? NEVER;
}

/** What one fire pass pushes for a schedule, and where it goes on. */
interface DueFires {
  /** Fire times to push now, ascending. */
  fire: Date[];
  /** The new next_fire_at: the first fire time after the last one considered. */
  next: Date;
  /** Missed fire times left unpushed by the policy (0 for `all` unless past the bound; a lower bound when large). */
  dropped: number;
}

/**
 * The fire times due at `now` from `first` (the stored next_fire_at, itself a
 * fire time), split by `misfireMs`: a fire time at most `misfireMs` old is on
 * time and always pushed; an older one is missed (no broker ran, or the pass
 * was held up) and follows `missed`: `skip` none, `one` the latest,
 * `all` each, at most SCHEDULE_MAX_CATCH_UP (the most recent). The cost is
 * bounded whatever the gap: missed times are read backwards from the cut.
 */
export function dueFires(clock: ScheduleClock, first: Date, now: Date, missed: ScheduleMissed, misfireMs: number): DueFires {
  const cut = Math.max(first.getTime(), now.getTime() - misfireMs);
  const onTime: Date[] = [];
  for (let t = clock.nextRun(new Date(cut - 1)); t && t.getTime() <= now.getTime(); t = clock.nextRun(t)) {
    onTime.push(t);
    // A misfire window wider than the bound: the rest is due on the next pass.
    if (onTime.length === SCHEDULE_MAX_CATCH_UP) return { fire: onTime, next: fireAfter(clock, t), dropped: 0 };
  }
  let late: Date[] = [];
  let dropped = 0;
  if (cut > first.getTime()) {
    // croner's previousRuns are strictly before the reference's whole
    // second; fire times are whole seconds, so `< cut` is `< ceil(cut)`.
    const want = missed === 'all' ? SCHEDULE_MAX_CATCH_UP + 1 : 1;
    const before = clock.previousRuns(want, new Date(Math.ceil(cut / 1000) * 1000)).filter((t) => t.getTime() >= first.getTime());
    late = before.reverse();
    if (missed === 'skip') {
      dropped = late.length;
      late = [];
    } else if (missed === 'all' && late.length > SCHEDULE_MAX_CATCH_UP) {
      dropped = late.length - SCHEDULE_MAX_CATCH_UP;
      late = late.slice(dropped);
    }
  }
  return { fire: [...late, ...onTime], next: fireAfter(clock, now), dropped };
}
