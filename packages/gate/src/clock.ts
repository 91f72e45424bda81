import { option, z, type GateContext } from '@queen-mq/core';

/** Options shared by the rate limiter helpers. */
export interface LimiterClockOptions {
  /**
   * Clock in epoch ms. Default: `ctx.streamTimeMs`, the broker's clock (as
   * the runner knows it) when the message is evaluated. Inject one to test
   * boundaries exactly.
   */
  now?: () => number;
  /**
   * How long (ms) a gate may wait inside the operator for capacity instead
   * of denying. Default 0: out of capacity, the gate denies at once, and the
   * denied message and the rest of its batch stay leased and come back, in
   * order, when the lease expires (a gate defers by lease; it does not
   * sleep). A wait is an explicit choice: it holds the cycle (the runner
   * extends the lease meanwhile) but admits at the configured rate, where a
   * deny costs at least one lease period (whole seconds) before the tail
   * returns, capping the admitted rate near `capacity / leaseTime`.
   */
  maxWaitMs?: number;
}

export function clockOf(options: LimiterClockOptions, ctx: GateContext): number {
  return options.now ? options.now() : ctx.streamTimeMs;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** {@link LimiterClockOptions} as schema fields, shared by the limiter schemas. */
export const limiterClockShape = {
  now: option(z.custom<() => number>((v) => typeof v === 'function').optional(), {
    description: "Clock in epoch ms; inject one to test boundaries exactly. Default: ctx.streamTimeMs (the broker's clock)",
    rule: 'must be a function returning epoch ms',
    type: '() => number',
  }),
  maxWaitMs: option(z.number().min(0).optional(), {
    description: 'How long a gate may wait inside the operator for capacity instead of denying; 0 = deny at once and defer the rest of the batch by lease',
    rule: 'must be a number ≥ 0',
    type: 'number (ms)',
    default: '0',
  }),
};
