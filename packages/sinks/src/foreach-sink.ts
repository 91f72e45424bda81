import { chainError, type SinkContext, type SinkPlugin } from '@queen-mq/core';

/**
 * Calls `fn` for every value that leaves the chain, then the cycle acks.
 * AT-LEAST-ONCE: the effect happens outside PostgreSQL, before the commit; if
 * the process dies or the commit fails after `fn` returned, the batch comes
 * back and `fn` runs again for the same values. An effect that must not
 * repeat belongs on a sink queue (`.to(queue)`) with a consumer of its own.
 * A throw from `fn` fails the cycle: nothing is acked and the batch returns.
 */
export function foreachSink<T = any>(fn: (value: T, ctx: SinkContext) => void | Promise<void>): SinkPlugin {
  if (typeof fn !== 'function') throw chainError('.foreach() requires a function');
  return Object.freeze({
    kind: 'foreach',
    shape: null,
    effect: (value: unknown, ctx: SinkContext) => fn(value as T, ctx),
  } satisfies SinkPlugin);
}
