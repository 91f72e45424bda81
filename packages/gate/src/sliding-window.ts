import { chainError, type GateContext } from '@queen-mq/core';
import { clockOf, maxWaitOption, sleep, type LimiterClockOptions } from './clock.js';

export interface SlidingWindowLimitOptions extends LimiterClockOptions {
  /** Messages admitted per window, a positive integer. */
  limit: number;
  /** Window length in seconds (> 0). */
  windowSeconds: number;
}

/**
 * A gate fn admitting at most `limit` messages in any `windowSeconds`-long
 * window per state key (exact sliding log, not an approximation): an
 * admission at time t occupies a slot during `[t, t + window)`. State in
 * `ctx.state.slidingWindow`: the admission times still inside the window
 * (at most `limit` numbers). Out of slots: waits for the oldest to leave the
 * window when that is within `maxWaitMs`, else denies.
 */
export function slidingWindowLimit(options: SlidingWindowLimitOptions): (value: unknown, ctx: GateContext) => boolean | Promise<boolean> {
  const limit = options?.limit;
  if (typeof limit !== 'number' || !Number.isInteger(limit) || limit <= 0) {
    throw chainError(`slidingWindowLimit: limit must be a positive integer, got ${JSON.stringify(limit)}`);
  }
  const seconds = options.windowSeconds;
  if (typeof seconds !== 'number' || !Number.isFinite(seconds) || seconds <= 0) {
    throw chainError(`slidingWindowLimit: windowSeconds must be a positive number, got ${JSON.stringify(seconds)}`);
  }
  const windowMs = seconds * 1000;
  const maxWaitMs = maxWaitOption('slidingWindowLimit', options.maxWaitMs);
  const take = (ctx: GateContext, at: number, prev: readonly number[]): boolean => {
    const live = prev.filter((t) => t > at - windowMs);
    if (live.length >= limit) return false;
    live.push(at);
    ctx.state.slidingWindow = live;
    return true;
  };
  return (_value, ctx) => {
    const prev = Array.isArray(ctx.state.slidingWindow) ? (ctx.state.slidingWindow as number[]) : [];
    const at = Math.max(clockOf(options, ctx), prev[prev.length - 1] ?? -Infinity);
    if (take(ctx, at, prev)) return true;
    // Full: the slot of the (live.length - limit)-th oldest admission frees first.
    const live = prev.filter((t) => t > at - windowMs);
    const freeAt = live[live.length - limit]! + windowMs;
    const waitMs = freeAt - at;
    if (waitMs > maxWaitMs) return false;
    return sleep(waitMs).then(() => take(ctx, freeAt, prev));
  };
}
