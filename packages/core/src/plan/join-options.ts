import { option, parseOptions, z } from '@queen-mq/protocol';
import { chainError } from './chain-error.js';

/** A duration as the join takes it: exactly one unit. */
export type JoinDuration = { ms: number } | { seconds: number } | { minutes: number } | { hours: number };

/** One function for both sides, or one per side. */
export type PerSide<F> = F | { left: F; right: F };

/**
 * `.join(rightQueue, options)`: an interval join of two queues partitioned
 * alike. The functions see each side's payload (the message's `data`).
 */
export interface JoinOptions<L = any, R = any, O = { left: L; right: R | null }> {
  /** Two records pair when their times differ by at most this (inclusive). */
  within: JoinDuration;
  /** The join key of a record (one function for both sides, or `{ left, right }`); records pair only with equal keys. */
  key: PerSide<(payload: any) => string | number>;
  /** The pair's output; default `{ left, right }`. `right` is null for an unmatched left record of a left join. */
  select?: (left: L, right: R | null) => O;
  /** `'inner'` (default): pairs only. `'left'`: also every left record that paired with nothing, once its bound has passed. */
  type?: 'inner' | 'left';
  /** Event time (Date, epoch ms or ISO string) per record; without it, the broker's createdAt (processing time). */
  eventTime?: PerSide<(payload: any) => unknown>;
  /** Seconds a record may come behind the newest time of its own side and still join; later than that it is late (dropped, counted). Default 0 in event time, 5 in processing time. */
  gracePeriod?: number;
  /** Processing time: how often (ms) the runner expires the held records of quiet partitions on the broker's clock; 0 turns it off. Default 1000. */
  idleFlushMs?: number;
}

/** Join options after defaults and checks; durations in ms. */
export interface ResolvedJoinOptions {
  withinMs: number;
  graceMs: number;
  type: 'inner' | 'left';
  keyLeft: (payload: any) => string | number;
  keyRight: (payload: any) => string | number;
  eventTimeLeft?: (payload: any) => unknown;
  eventTimeRight?: (payload: any) => unknown;
  select: (left: any, right: any) => unknown;
  /** Processing time: the idle expiry's interval (0: off); always 0 in event time, where only records move a side's time. */
  idleFlushMs: number;
}

const fn = z.custom<(v: any) => unknown>((v) => typeof v === 'function');
const perSide = z.union([fn, z.object({ left: fn, right: fn }).strict()]);
const duration = z.union([
  z.object({ ms: z.number().int().min(0) }).strict(),
  z.object({ seconds: z.number().min(0) }).strict(),
  z.object({ minutes: z.number().min(0) }).strict(),
  z.object({ hours: z.number().min(0) }).strict(),
]);

/** The options of `.join()`, as one schema: it validates them and renders their docs table. */
export const joinOptionsSchema = z.object({
  within: option(duration, {
    description: 'Two records pair when their times differ by at most this (inclusive)',
    rule: 'must be one of { ms }, { seconds }, { minutes }, { hours } (a non-negative number)',
    type: '{ seconds } \\| { minutes } \\| { hours } \\| { ms }',
  }),
  key: option(perSide, { description: "A record's join key (String() of the answer); records pair only with equal keys", rule: 'must be a function or { left, right } functions', type: '(payload) => string \\| number, or { left, right }' }),
  select: option(fn.optional(), { description: 'The pair as pushed to the sink; right is null for an unmatched left record of a left join', rule: 'must be a function', type: '(left, right) => output', default: '({ left, right })' }),
  type: option(z.enum(['inner', 'left']).optional(), { description: "'left' also emits every left record that paired with nothing, once its bound has passed", rule: 'must be "inner" or "left"', type: '"inner" \\| "left"', default: '"inner"' }),
  eventTime: option(perSide.optional(), { description: "Event-time extractor per record (Date, epoch ms or ISO string); without it the broker's createdAt", rule: 'must be a function or { left, right } functions', type: '(payload) => Date \\| number \\| string, or { left, right }' }),
  gracePeriod: option(z.number().min(0).optional(), {
    description: 'How far (s) a record may come behind the newest time already seen on its own side and still join; a record later than that is late: dropped and counted in lateEventsTotal',
    rule: 'must be a non-negative number',
    type: 'number (s)',
    default: '0 in event time, 5 in processing time (pushes can commit slightly out of createdAt order)',
  }),
  idleFlushMs: option(z.number().int().min(0).optional(), {
    description:
      "Processing time: how often the runner expires the held records of partitions whose queues have gone quiet, on the broker's clock (a left join's unpaired records are emitted then); 0 turns it off. Ignored in event time",
    rule: 'must be a non-negative integer',
    type: 'number (ms)',
    default: '1000',
  }),
});

/** How often a processing-time join looks for held records whose bound the broker's clock has passed. */
const DEFAULT_JOIN_IDLE_FLUSH_MS = 1000;

/** Processing time's grace: two pushes to one partition can commit a moment out of their createdAt order. */
const PROCESSING_TIME_GRACE_S = 5;

function durationMs(d: JoinDuration): number {
  if ('ms' in d) return d.ms;
  if ('seconds' in d) return Math.round(d.seconds * 1000);
  if ('minutes' in d) return Math.round(d.minutes * 60_000);
  return Math.round(d.hours * 3_600_000);
}

const sides = <F>(v: PerSide<F>): [F, F] => (typeof v === 'function' ? [v, v] : [(v as { left: F }).left, (v as { right: F }).right]);

/** Core's join option checks; an unknown option throws VALIDATION_FAILED naming it. */
export function resolveJoinOptions(options: JoinOptions | undefined): ResolvedJoinOptions {
  if (options === undefined || options === null) throw chainError('.join() needs options: { within, key }');
  const o = parseOptions('.join()', joinOptionsSchema, options);
  const [keyLeft, keyRight] = sides(o.key as PerSide<(p: any) => string | number>);
  const eventTime = o.eventTime === undefined ? undefined : sides(o.eventTime as PerSide<(p: any) => unknown>);
  return {
    withinMs: durationMs(o.within as JoinDuration),
    graceMs: Math.round((o.gracePeriod ?? (eventTime ? 0 : PROCESSING_TIME_GRACE_S)) * 1000),
    type: o.type ?? 'inner',
    keyLeft,
    keyRight,
    ...(eventTime ? { eventTimeLeft: eventTime[0], eventTimeRight: eventTime[1] } : {}),
    select: (o.select as ((l: any, r: any) => unknown) | undefined) ?? ((left, right) => ({ left, right })),
    idleFlushMs: eventTime ? 0 : (o.idleFlushMs ?? DEFAULT_JOIN_IDLE_FLUSH_MS),
  };
}
