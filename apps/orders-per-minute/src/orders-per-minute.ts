import { Queen, Stream, type RunHandle } from 'queen-mq';

/** A queue as a chain names it: `queen.queue('orders')` or `{ name: 'orders' }`. */
type QueueRef = Parameters<typeof Stream.from>[0];

/** Options of {@link runOrdersPerMinute}; the defaults are the seed's. */
export interface OrdersPerMinuteOptions {
  /** Broker URL. */
  url: string;
  /** Source queue of orders (`{amount}` payloads). Default `orders`. */
  source?: string;
  /** Sink queue of per-window totals. Default `orders.per_minute`. */
  sink?: string;
  /** Stream query name. Default `orders.per_minute`. */
  queryId?: string;
  /** Window length, seconds. Default 60. */
  seconds?: number;
  /** Idle flush, ms. Default 5000. */
  idleFlushMs?: number;
  /** Messages per pop. Default 50. */
  batchSize?: number;
  onError?: (error: Error) => void;
}

/**
 * The chain of the seed's example, before `.run()`: orders with a positive
 * amount, counted and summed per tumbling window of `seconds`, one
 * `{count, sum}` per closed window on `sink`.
 */
export function ordersPerMinute(source: QueueRef, sink: QueueRef, options: { seconds?: number; idleFlushMs?: number } = {}) {
  return Stream.from(source)
    .filter((msg) => msg.data.amount > 0)
    .windowTumbling({ seconds: options.seconds ?? 60, idleFlushMs: options.idleFlushMs ?? 5000 })
    .aggregate({ count: () => 1, sum: (m) => m.amount })
    .to(sink);
}

/**
 * The seed's example as a worker: orders with a positive amount, counted and
 * summed per tumbling window; one message per closed window on the sink,
 * `{count, sum}`, exactly once.
 */
export async function runOrdersPerMinute(options: OrdersPerMinuteOptions): Promise<{ handle: RunHandle; queen: Queen }> {
  const { url } = options;
  const queen = new Queen({ url });
  const handle = await ordersPerMinute(queen.queue(options.source ?? 'orders'), queen.queue(options.sink ?? 'orders.per_minute'), options).run({ queryId: options.queryId ?? 'orders.per_minute', url, batchSize: options.batchSize ?? 50, onError: options.onError });
  return { handle, queen };
}
