import type { AckInput, PoppedMessage, PopResponse } from '@queen-mq/protocol';
import type { QueueHandle } from './queue-handle.js';
import { parseOptions } from '@queen-mq/protocol';
import { backoffDelay, sleep } from './retry.js';
import { consumeOptionsSchema } from './options.js';
import { consumerParent, inSpan, startMessagingSpan, tracingEnabled } from './tracing.js';

export type MessageHandler = (message: PoppedMessage) => unknown | Promise<unknown>;
export type BatchHandler = (messages: PoppedMessage[]) => unknown | Promise<unknown>;

/** Options of `queue.consume()` (schema: `consumeOptionsSchema`; an unknown or mistyped option throws VALIDATION_FAILED). */
export interface ConsumeOptions {
  /** Messages per pop. Default 1. */
  batch?: number;
  /** Parallel pop loops (each holds at most one batch at a time). Default 1. */
  concurrency?: number;
  /** Default the queue-mode group. */
  consumerGroup?: string;
  /** Long-poll bound per pop, ms. Default 30000. `0` polls without waiting, pausing `idleMs` when empty. */
  wait?: number;
  /** Pause after an empty non-waiting pop, ms. Default 250. */
  idleMs?: number;
  /** Messages are acked by the pop itself: a handler throw is only reported. Default false. */
  autoAck?: boolean;
  /** Partitions one pop may claim (queue-wide consumers). Default 1. */
  partitions?: number;
  /** `handler(message)` per message (true, default) or `handler(messages)` per batch (false). */
  each?: boolean;
  /** Aborting it stops the consumer like `stop()`. */
  signal?: AbortSignal;
  /**
   * Called with a handler throw, a failed pop or ack, or an ack item the broker
   * refused (e.g. LEASE_EXPIRED when a handler outlived its lease). Default: console.error.
   */
  onError?: (err: unknown, messages?: PoppedMessage[]) => void;
}

/** A running consumer. */
export interface Consumer {
  /** Stops popping, lets in-flight messages finish and be acked, then resolves. */
  stop(): Promise<void>;
  /** Resolves when every loop has ended (after stop() or the signal). */
  readonly done: Promise<void>;
}

function errorText(err: unknown): string {
  const text = err instanceof Error ? err.message || err.name : String(err);
  return text.slice(0, 10000);
}

/**
 * The consume loop: `concurrency` loops each long-poll a batch, run the
 * handler, and ack what it settled in one call. Per message (each:true) a
 * success acks `completed`; the first throw acks that message `failed` (a
 * failure is charged, the lease is released) and leaves the rest of its
 * partition's batch unprocessed, so they come back in order with it. A batch
 * handler (each:false) acks the whole batch `completed`, or `failed` on a throw.
 */
export function consume(queue: QueueHandle, handler: MessageHandler | BatchHandler, options: ConsumeOptions = {}): Consumer {
  parseOptions('consume()', consumeOptionsSchema, options);
  const concurrency = options.concurrency ?? 1;
  const waitMs = options.wait ?? 30000;
  const each = options.each ?? true;
  const onError = options.onError ?? ((err: unknown) => console.error('[queen consume]', err));
  const stopper = new AbortController();
  const stopping = stopper.signal;
  const onSignal = () => stopper.abort();
  if (options.signal?.aborted) stopper.abort();
  options.signal?.addEventListener('abort', onSignal, { once: true });

  /**
   * The handler over `batch`, inside a `process` span when tracing: its
   * parent is the (first) message's creation context, so the handler's own
   * spans continue the producer's trace.
   */
  function traced(batch: PoppedMessage[], call: () => unknown): unknown {
    const first = batch[0]!;
    const { parent, links } = consumerParent(batch);
    const span = startMessagingSpan({
      operation: 'process',
      queue: first.queue,
      count: batch.length,
      consumerGroup: options.consumerGroup,
      ...(batch.length === 1 ? { messageId: first.id, partitionId: first.partitionId } : {}),
      parent,
      links,
    });
    return inSpan(span, call);
  }

  async function settle(response: PopResponse): Promise<void> {
    const messages = response.messages;
    const acks: AckInput[] = [];
    const tracing = tracingEnabled();
    if (each) {
      // Per partition, in offset order; a throw stops that partition only.
      const byPartition = new Map<string, PoppedMessage[]>();
      for (const m of messages) {
        const list = byPartition.get(m.partitionId);
        if (list) list.push(m);
        else byPartition.set(m.partitionId, [m]);
      }
      for (const group of byPartition.values()) {
        for (const m of group) {
          try {
            // Untraced, the handler is called as is: nothing allocated per message.
            await (tracing ? traced([m], () => (handler as MessageHandler)(m)) : (handler as MessageHandler)(m));
            acks.push({ ...m, status: 'completed' });
          } catch (err) {
            onError(err, [m]);
            acks.push({ ...m, status: 'failed', error: errorText(err) });
            break;
          }
        }
      }
    } else {
      try {
        await (tracing ? traced(messages, () => (handler as BatchHandler)(messages)) : (handler as BatchHandler)(messages));
        for (const m of messages) acks.push({ ...m, status: 'completed' });
      } catch (err) {
        onError(err, messages);
        for (const m of messages) acks.push({ ...m, status: 'failed', error: errorText(err) });
      }
    }
    if (options.autoAck || acks.length === 0) return;
    try {
      // Not the stop signal: an in-flight batch is acked even while stopping.
      const results = await queue.queen.ack(acks, { consumerGroup: response.consumerGroup });
      for (const r of results) if (!r.success) onError(Object.assign(new Error(r.error ?? 'ack refused'), { code: r.code }), messages.filter((m) => m.transactionId === r.transactionId));
    } catch (err) {
      onError(err, messages);
    }
  }

  async function loop(): Promise<void> {
    let failures = 0;
    while (!stopping.aborted) {
      let response: PopResponse | null;
      try {
        response = await queue.pop({
          batch: options.batch,
          wait: waitMs > 0,
          timeout: waitMs > 0 ? waitMs : undefined,
          consumerGroup: options.consumerGroup,
          autoAck: options.autoAck,
          partitions: options.partitions,
          // Stopping abandons a parked long poll; the broker claims nothing for it.
          signal: stopping,
        });
        failures = 0;
      } catch (err) {
        if (stopping.aborted) break;
        onError(err);
        await sleep(backoffDelay(Math.min(failures++, 6), { baseMs: 200, maxMs: 5000 }), stopping).catch(() => undefined);
        continue;
      }
      if (!response) {
        if (waitMs === 0) await sleep(options.idleMs ?? 250, stopping).catch(() => undefined);
        continue;
      }
      await settle(response);
    }
  }

  const done = Promise.all(Array.from({ length: concurrency }, () => loop())).then(() => {
    options.signal?.removeEventListener('abort', onSignal);
  });
  return {
    done,
    stop: async () => {
      stopper.abort();
      await done;
    },
  };
}
