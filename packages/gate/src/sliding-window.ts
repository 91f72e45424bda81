import { option, parseOptions, z, type GateContext } from '@queen-mq/core';
import { clockOf, limiterClockShape, sleep, type LimiterClockOptions } from './clock.js';

export interface SlidingWindowLimitOptions extends LimiterClockOptions {
  /** Messages admitted per window, a positive integer. */
  limit: number;
  /** Window length in seconds (> 0). */
  windowSeconds: number;
}

/** {@link SlidingWindowLimitOptions} as a schema: validates `slidingWindowLimit()` and renders its options table. */
export const slidingWindowLimitOptionsSchema = z.object({
  limit: option(z.number().int().positive(), { description: 'Messages admitted per window', rule: 'must be a positive integer', type: 'integer' }),
  windowSeconds: option(z.number().positive(), { description: 'Window length', rule: 'must be a positive number', type: 'number (s)' }),
  ...limiterClockShape,
});

/**
 * A gate fn admitting at most `limit` messages in any `windowSeconds`-long
 * window per state key (exact sliding log, not an approximation): an
 * admission at time t occupies a slot during `[t, t + window)`. State in
 * `ctx.state.slidingWindow`: the admission times still inside the window
 * (at most `limit` numbers). Out of slots: denies (the tail stays leased and
 * returns, in order, when the lease expires); with `maxWaitMs` set, it first
 * waits for the oldest to leave the window when that is within `maxWaitMs`.
 */
export function slidingWindowLimit(options: SlidingWindowLimitOptions): (value: unknown, ctx: GateContext) => boolean | Promise<boolean> {
  const o = parseOptions('slidingWindowLimit', slidingWindowLimitOptionsSchema, options);
  const limit = o.limit;
  const windowMs = o.windowSeconds * 1000;
  const maxWaitMs = o.maxWaitMs ?? 0;
  const take = (ctx: GateContext, at: number, prev: readonly number[]): boolean => {
    const live = prev.filter((t) => t > at - windowMs);
    if (live.length >= limit) return false;
    live.push(at);
    ctx.state.slidingWindow = live;
    return true;
  };
  return (_value, ctx) => {
    const prev = Array.isArray(ctx.state.slidingWindow) ? (ctx.state.slidingWindow as number[]) : [];
    const at = Math.max(clockOf(o, ctx), prev[prev.length - 1] ?? -Infinity);
    if (take(ctx, at, prev)) return true;
    // Full: the slot of the (live.length - limit)-th oldest admission frees first.
    const live = prev.filter((t) => t > at - windowMs);
    const freeAt = live[live.length - limit]! + windowMs;
    const waitMs = freeAt - at;
    if (waitMs > maxWaitMs) return false;
    return sleep(waitMs).then(() => take(ctx, freeAt, prev));
  };
}
