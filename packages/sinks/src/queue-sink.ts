import { chainError, option, parseOptions, z, type SinkPlugin, type QueueRef } from '@queen-mq/core';

/** Options of {@link queueSink}. */
export interface QueueSinkOptions<T = any> {
  /**
   * Sink partition: a name, or a function of the value. Default: the
   * partition the handle is pinned to (`queen.queue(q).partition(p)`), else
   * the source partition's name, so per-partition order carries over.
   */
  partition?: string | ((value: T) => string);
}

/** {@link QueueSinkOptions} as a schema: validates `queueSink()` / `.to(queue, options)` and renders the options table. */
export const queueSinkOptionsSchema = z.object({
  partition: option(z.union([z.string().min(1), z.custom<(value: any) => string>((v) => typeof v === 'function')]).optional(), {
    description: "Sink partition: a name, or a function of the value. Default: the handle's pinned partition, else the source partition's name",
    rule: 'must be a non-empty string or a function of the value',
    type: 'string \\| (value) => string',
  }),
});

/**
 * Pushes every value that leaves the chain to `queue` (a handle pinned to
 * one partition writes every value there), inside the cycle's
 * transaction: the push, the state change and the source ack commit together
 * (exactly-once). Each push carries a deterministic transactionId, so a
 * replayed emit is a `duplicate` on the sink instead of a second message.
 */
export function queueSink<T = any>(queue: QueueRef | string, options: QueueSinkOptions<T> = {}): SinkPlugin {
  const name = typeof queue === 'string' ? queue : queue?.name;
  if (typeof name !== 'string' || name === '') throw chainError('.to() takes a queue handle (queen.queue(name)) or a queue name');
  const { partition: given } = parseOptions('.to()', queueSinkOptionsSchema, options);
  const pinned = typeof queue === 'string' ? undefined : queue.partitionName;
  if (pinned !== undefined && given !== undefined) {
    throw chainError('.to(): the queue handle is pinned to a partition; do not pass options.partition too');
  }
  const partition = given ?? pinned;
  if (partition !== undefined && typeof partition !== 'function' && (typeof partition !== 'string' || partition === '')) {
    throw chainError('.to(): the pinned partition must be a non-empty string');
  }
  return Object.freeze({
    kind: 'queue',
    shape: { queue: name },
    sinkQueue: name,
    toPushItems(value: unknown, ctx) {
      let target = ctx.partition;
      if (typeof partition === 'string') target = partition;
      else if (typeof partition === 'function') {
        const p = partition(value as T);
        if (typeof p !== 'string' || p === '') throw chainError(`.to(): the partition function returned ${JSON.stringify(p)}; expected a non-empty string`);
        target = p;
      }
      return [{ queue: name, partition: target, payload: value }];
    },
  } satisfies SinkPlugin);
}
