/**
 * How admissions are counted: which KV counter a message is charged to now,
 * and when a message refused now should come back.
 */
export interface AdmissionWindow {
  /** The counter for `key` at `nowMs`: incr'd with this max, created with this TTL. */
  counter(key: string, nowMs: number): { namespace: string; key: string; max: number; ttlSeconds: number };
  /** When a message refused at `nowMs` is pushed again (epoch ms). */
  retryAt(nowMs: number): number;
}

/**
 * A fixed window anchored at the first admission: the counter is created
 * with `ttlSeconds` and admits `max` until it expires (the seed's K12 shape,
 * `incr rl/k {max:3, ttlSeconds:2}`). Refused messages come back after
 * `retryDelayMs`.
 */
export function ttlWindow(options: { namespace: string; max: number; ttlSeconds: number; retryDelayMs: number }): AdmissionWindow {
  return {
    counter: (key) => ({ namespace: options.namespace, key, max: options.max, ttlSeconds: options.ttlSeconds }),
    retryAt: (nowMs) => nowMs + options.retryDelayMs,
  };
}

/**
 * `limit` admissions per clock-aligned period of `periodMs` (100 per second
 * = `{limit: 100, periodMs: 1000}`): one counter per (key, period), so
 * periods follow each other back to back and a backlog drains at exactly the
 * limit. Refused messages come back at the start of the next period. The
 * period is read from this process's clock: consumers on several hosts need
 * synchronised clocks (NTP) to share a limit exactly.
 */
export function alignedWindow(options: { namespace: string; limit: number; periodMs: number }): AdmissionWindow {
  const ttlSeconds = Math.max(1, Math.ceil((2 * options.periodMs) / 1000));
  return {
    counter: (key, nowMs) => ({
      namespace: options.namespace,
      key: `${key}@${Math.floor(nowMs / options.periodMs)}`,
      max: options.limit,
      ttlSeconds,
    }),
    retryAt: (nowMs) => (Math.floor(nowMs / options.periodMs) + 1) * options.periodMs,
  };
}
