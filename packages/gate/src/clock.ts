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
   * How long (ms) a gate may wait for capacity instead of denying. Default
   * 1000. A deny costs at least one lease period (lease times are whole
   * seconds, ≥ 1 s) before the denied tail returns, so waiting up to a second
   * for the next token is never slower than denying, and it keeps the
   * admitted rate at the configured rate instead of at capacity per lease.
   * The runner extends the lease while a gate waits (the cycle is still
   * being computed). 0 = deny at once, never wait.
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
    description: 'How long a gate may wait for capacity instead of denying; 0 = deny at once',
    rule: 'must be a number ≥ 0',
    type: 'number (ms)',
    default: '1000',
  }),
};
