import { pushWireItem, type PopResponse, type PushInput, type PushResult } from '@queen-mq/protocol';
import { consume, type ConsumeOptions, type Consumer, type BatchHandler, type MessageHandler } from './consume.js';
import type { Queen } from './queen.js';
import { consumerParent, inSpan, startMessagingSpan, traceIdAsUuid, traceparentOf, tracingEnabled } from './tracing.js';

export interface PopOptions {
  /** Messages at most, across claimed partitions (1..10000). Default 1. */
  batch?: number;
  /** Long-poll: park until a message can be delivered or `timeout` passes. Default false. */
  wait?: boolean;
  /** Long-poll bound, ms (only with `wait`). Server default 30000. */
  timeout?: number;
  /** Default the queue-mode group (competing consumers). */
  consumerGroup?: string;
  /** Move the cursor inside the pop; no lease, `leaseId:""`. Default false. */
  autoAck?: boolean;
  /** Partitions claimed at most by one pop (queue-wide pops only). Default 1. */
  partitions?: number;
  /** Where a new consumer group starts: `all` (from the beginning) or `new`. */
  subscriptionMode?: 'all' | 'new';
  /** `now` or a time: a new group starts after messages created before it. */
  subscriptionFrom?: 'now' | string | Date;
  signal?: AbortSignal;
}

/**
 * A queue, optionally pinned to one partition (`queue.partition('p')`): push
 * targets that partition and pop reads only it.
 */
export class QueueHandle {
  constructor(
    readonly queen: Queen,
    readonly name: string,
    /** The pinned partition, if any. */
    readonly partitionName?: string,
  ) {}

  /** The same queue pinned to partition `name`. */
  partition(name: string): QueueHandle {
    return new QueueHandle(this.queen, this.name, name);
  }

  /**
   * Appends one item or a list in one transaction (all or none); answers the
   * broker's 201 array in input order (`status` queued or duplicate, `offset`).
   * Retried on connection errors and 5xx only when every item has a
   * `transactionId`: deduplication makes a resend harmless. Without one a
   * resend could store the message twice, so such a push is not retried once
   * sent (it is retried when the connection failed before sending).
   */
  async push(items: PushInput | unknown | (PushInput | unknown)[], options: { signal?: AbortSignal } = {}): Promise<PushResult[]> {
    const list = Array.isArray(items) ? items : [items];
    if (list.length === 0) return [];
    // While tracing, every message carries the push span as its creation context (one traceparent for the call).
    const span = tracingEnabled() ? startMessagingSpan({ operation: 'push', queue: this.name, count: list.length }) : undefined;
    const traceparent = span && traceparentOf(span);
    const traceUuid = traceparent && traceIdAsUuid(traceparent);
    const wire = list.map((raw) => {
      const item = pushWireItem(this.name, raw, this.partitionName);
      return traceparent ? { ...item, traceId: item.traceId ?? traceUuid, traceparent } : item;
    });
    const idempotent = wire.every((i) => 'transactionId' in i);
    const send = () => this.queen.api.push({ body: { items: wire }, idempotent, signal: options.signal }) as Promise<PushResult[]>;
    if (!span) return send();
    return inSpan(span, send, (results, s) => {
      if (results.length === 1) s.setAttribute('messaging.message.id', results[0]!.message_id);
    });
  }

  /**
   * Leases up to `batch` messages; `null` when there is nothing to deliver
   * (204). Not retried once sent: a lost answer leaves a lease that simply
   * expires and the messages come back.
   */
  async pop(options: PopOptions = {}): Promise<PopResponse | null> {
    const from = options.subscriptionFrom instanceof Date ? options.subscriptionFrom.toISOString() : options.subscriptionFrom;
    const waitMs = options.wait ? (options.timeout ?? 30000) : 0;
    const call = {
      query: {
        batch: options.batch,
        wait: options.wait,
        timeout: options.wait ? options.timeout : undefined,
        consumerGroup: options.consumerGroup,
        autoAck: options.autoAck,
        partitions: this.partitionName === undefined ? options.partitions : undefined,
        subscriptionMode: options.subscriptionMode,
        subscriptionFrom: from,
      },
      idempotent: false,
      signal: options.signal,
      // The per-attempt timeout must outlast the server-side long poll.
      timeoutMs: waitMs ? waitMs + 30000 : undefined,
    };
    // A 204 (nothing to deliver) answers null.
    const send = () =>
      (this.partitionName === undefined
        ? this.queen.api.popQueue({ params: { queue: this.name }, ...call })
        : this.queen.api.popPartition({ params: { queue: this.name, partition: this.partitionName }, ...call })) as Promise<PopResponse | null>;
    if (!tracingEnabled()) return send();
    const span = startMessagingSpan({ operation: 'pop', queue: this.name, consumerGroup: options.consumerGroup });
    return inSpan(span, send, (res, s) => {
      if (!res) return;
      const n = res.messages.length;
      if (n > 1) s.setAttribute('messaging.batch.message_count', n);
      else s.setAttribute('messaging.message.id', res.messages[0]!.id);
      // A receive links to the creation context of every message it delivered.
      s.addLinks(consumerParent(res.messages).links);
    });
  }

  /** Runs `handler` for every message (see {@link consume}). */
  consume(handler: MessageHandler, options?: ConsumeOptions & { each?: true }): Consumer;
  consume(handler: BatchHandler, options: ConsumeOptions & { each: false }): Consumer;
  consume(handler: MessageHandler | BatchHandler, options: ConsumeOptions = {}): Consumer {
    return consume(this, handler, options);
  }
}
