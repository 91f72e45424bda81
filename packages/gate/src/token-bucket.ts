import { option, parseOptions, z, type GateContext } from '@queen-mq/core';
import { clockOf, limiterClockShape, sleep, type LimiterClockOptions } from './clock.js';

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

/** {@link TokenBucketOptions} as a schema: validates `tokenBucket()` and renders its options table. */
export const tokenBucketOptionsSchema = z.object({
  capacity: option(z.number().int().positive(), { description: 'Tokens the bucket holds (the burst); a new key starts full', rule: 'must be a positive integer', type: 'integer' }),
  refillPerSecond: option(z.number().positive(), { description: 'Tokens added per second, continuously, up to capacity', rule: 'must be a positive number', type: 'number (/s)' }),
  ...limiterClockShape,
});


/**
 * A gate fn admitting at most `capacity` messages at once and
 * `refillPerSecond` on average per state key (the source partition unless a
 * keyBy precedes the gate: partition the source by the limit key). State in
 * `ctx.state.tokenBucket` (`{milliTokens, refilledAt}`); a denied evaluation's
 * update is discarded by the runner, so a deny consumes nothing.
 *
 * Out of tokens: denies (the tail stays leased and returns, in order, when
 * the lease expires). With `maxWaitMs` set, it first waits for the next token
 * when that is due within `maxWaitMs`.
 */
export function tokenBucket(options: TokenBucketOptions): (value: unknown, ctx: GateContext) => boolean | Promise<boolean> {
  const o = parseOptions('tokenBucket', tokenBucketOptionsSchema, options);
  const capacity = o.capacity;
  const refill = o.refillPerSecond;
  const maxWaitMs = o.maxWaitMs ?? 0;
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
    const at = clockOf(o, ctx);
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
