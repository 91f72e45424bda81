import { chainError, type SinkContext, type SinkPlugin } from '@queen-mq/core';

/**
 * Calls `fn` for every value that leaves the chain, then the cycle acks.
 * Once per emit in a healthy process: a cycle recomputed after a
 * VERSION_CONFLICT does not run `fn` again for an emit it already served.
 * AT-LEAST-ONCE across failures: the effect happens outside PostgreSQL,
 * before the commit; if the process dies or the commit fails after `fn`
 * returned, the batch comes back and `fn` runs again for the same values. An
 * effect that must not repeat belongs on a sink queue (`.to(queue)`) with a
 * consumer of its own. A throw from `fn` on a per-message chain makes that
 * message poison (retried to the queue's retryLimit, then dead-lettered).
 */
export function foreachSink<T = any>(fn: (value: T, ctx: SinkContext) => void | Promise<void>): SinkPlugin {
  if (typeof fn !== 'function') throw chainError('.foreach() requires a function');
  return Object.freeze({
    kind: 'foreach',
    shape: null,
    effect: (value: unknown, ctx: SinkContext) => fn(value as T, ctx),
  } satisfies SinkPlugin);
}
