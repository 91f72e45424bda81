import { chainError, type GateContext } from '@queen-mq/core';
import { clockOf, maxWaitOption, sleep, type LimiterClockOptions } from './clock.js';

export interface TokenBucketOptions extends LimiterClockOptions {
  /** Tokens the bucket holds (the burst), a positive integer. A new key starts full. */
  capacity: number;
  /** Tokens added per second (> 0), continuously, up to `capacity`. */
  refillPerSecond: number;
}

/** The bookkeeping a token bucket keeps in `ctx.state`. */
export interface TokenBucketState {
  /** Tokens × 1000 (integer arithmetic keeps the boundaries exact). */
  milliTokens: number;
  /** Clock (epoch ms) the tokens were computed at. */
  refilledAt: number;
}

function positive(name: string, v: unknown, integer: boolean): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0 || (integer && !Number.isInteger(v))) {
    throw chainError(`tokenBucket: ${name} must be a positive ${integer ? 'integer' : 'number'}, got ${JSON.stringify(v)}`);
  }
  return v;
}


/**
 * A gate fn admitting at most `capacity` messages at once and
 * `refillPerSecond` on average per state key (the source partition unless a
 * keyBy precedes the gate: partition the source by the limit key). State in
 * `ctx.state.tokenBucket` (`{milliTokens, refilledAt}`); a denied evaluation's
 * update is discarded by the runner, so a deny consumes nothing.
 *
 * Out of tokens: waits for the next one when it is due within `maxWaitMs`,
 * else denies (the tail stays leased and returns when the lease expires).
 */
export function tokenBucket(options: TokenBucketOptions): (value: unknown, ctx: GateContext) => boolean | Promise<boolean> {
  const capacity = positive('capacity', options?.capacity, true);
  const refill = positive('refillPerSecond', options.refillPerSecond, false);
  const maxWaitMs = maxWaitOption('tokenBucket', options.maxWaitMs);
  const full = capacity * 1000;
  const take = (ctx: GateContext, at: number, prev: TokenBucketState | undefined): boolean => {
    // milliTokens grow by `refill` per ms: tokens/s × 1000 milli / 1000 ms.
    const elapsed = prev ? Math.max(0, at - prev.refilledAt) : 0;
    const have = prev ? Math.min(full, prev.milliTokens + elapsed * refill) : full;
    if (have < 1000) return false;
    ctx.state.tokenBucket = { milliTokens: have - 1000, refilledAt: prev ? Math.max(at, prev.refilledAt) : at } satisfies TokenBucketState;
    return true;
  };
  return (_value, ctx) => {
    const prev = ctx.state.tokenBucket as TokenBucketState | undefined;
    const at = clockOf(options, ctx);
    if (take(ctx, at, prev)) return true;
    // prev exists here (a new key starts full). Time until one whole token:
    const base = Math.max(at, prev!.refilledAt);
    const have = prev!.milliTokens + (base - prev!.refilledAt) * refill;
    const waitMs = Math.ceil((1000 - have) / refill);
    if (waitMs > maxWaitMs) return false;
    // Book the token at the instant it is due (deterministic, independent of timer jitter).
    return sleep(waitMs).then(() => take(ctx, base + waitMs, prev));
  };
}
