import { QueenError, isErrorCode, pushWireItem, type AckInput, type AckStatus, type PushInput, type KvOpResult, type TimerResult, type TransactionAckResult, type TransactionPushResult } from '@queen-mq/protocol';
import type { Queen } from './queen.js';

/** A queue by name, or a handle (a pinned handle supplies the partition). */
export type QueueRef = string | { name: string; partitionName?: string };

/** One timer (PROTOCOL §6): exactly one of `fireAt` and `delayMs`. */
export interface TimerInput {
  queue: QueueRef;
  /** Default: the handle's pinned partition, else `Default`. */
  partition?: string;
  payload?: unknown;
  /** When to push; at most one year ahead. A past time fires at the next poll. */
  fireAt?: Date | string;
  /** From the broker's now, ms (0 .. 31536000000). */
  delayMs?: number;
  /** The message's transactionId (default `timer:<timerId>`); a pending twin answers `duplicate`. */
  transactionId?: string;
}

/** A KV op as the wire carries it; `@queen-mq/kv` adds the friendly `tx.kv`. */
export type TransactionKvOp =
  | { op: 'set'; namespace: string; key: string; value: unknown; ttlSeconds?: number; expectedVersion?: number }
  | { op: 'incr'; namespace: string; key: string; by?: number; max?: number; ttlSeconds?: number; requireApplied?: boolean }
  | { op: 'delete'; namespace: string; key: string; expectedVersion?: number };

export type { TransactionPushResult, TransactionAckResult } from '@queen-mq/protocol';

export interface TransactionResult {
  transactionId: string;
  success: true;
  results: (TransactionPushResult | TransactionAckResult)[];
  kvResults: KvOpResult[];
  timerResults: TimerResult[];
}

export interface TransactionAckOptions {
  /** Default: the item's `consumerGroup`, else the queue-mode group. */
  consumerGroup?: string;
  /** Default `completed`; `failed` and `dlq` dead-letter immediately inside a transaction. */
  status?: AckStatus;
  error?: string;
}

function queueOf(ref: QueueRef): { name: string; partition?: string } {
  return typeof ref === 'string' ? { name: ref } : { name: ref.name, partition: ref.partitionName };
}

/**
 * Pushes, acks, KV ops and timers committed in ONE PostgreSQL transaction
 * (POST /api/v1/transaction): all of them or none. Build it with
 * `queen.transaction()`, chain, then `commit()`.
 *
 * ```ts
 * await queen.transaction().push('work', { payload: job }).ack(message).commit();
 * ```
 */
export class TransactionBuilder {
  private readonly operations: Record<string, unknown>[] = [];
  private readonly kvOps: TransactionKvOp[] = [];
  private readonly timerList: Record<string, unknown>[] = [];

  constructor(readonly queen: Queen) {}

  /** Appends items to a queue (same item forms as `queue.push`); a duplicate transactionId reports `duplicate` and does not abort. */
  push(queue: QueueRef, items: PushInput | unknown | (PushInput | unknown)[]): this {
    const q = queueOf(queue);
    const list = Array.isArray(items) ? items : [items];
    if (list.length === 0) return this;
    this.operations.push({
      type: 'push',
      items: list.map((raw) => pushWireItem(q.name, raw, q.partition)),
    });
    return this;
  }

  /** Acknowledges popped messages (their `leaseId` fences the ack); any failing ack rolls everything back. */
  ack(items: AckInput | AckInput[], options: TransactionAckOptions = {}): this {
    for (const i of Array.isArray(items) ? items : [items]) {
      const group = options.consumerGroup ?? i.consumerGroup;
      const error = i.error ?? options.error;
      this.operations.push({
        type: 'ack',
        transactionId: i.transactionId,
        partitionId: i.partitionId,
        status: i.status ?? options.status ?? 'completed',
        ...(group ? { consumerGroup: group } : {}),
        ...(i.leaseId ? { leaseId: i.leaseId } : {}),
        ...(error !== undefined ? { error } : {}),
      });
    }
    return this;
  }

  /** Schedules a message for later; it exists only if the transaction commits. */
  timer(timer: TimerInput): this {
    const q = queueOf(timer.queue);
    const partition = timer.partition ?? q.partition;
    this.timerList.push({
      queue: q.name,
      ...(partition !== undefined ? { partition } : {}),
      payload: timer.payload ?? null,
      ...(timer.fireAt !== undefined ? { fireAt: timer.fireAt instanceof Date ? timer.fireAt.toISOString() : timer.fireAt } : {}),
      ...(timer.delayMs !== undefined ? { delayMs: timer.delayMs } : {}),
      ...(timer.transactionId !== undefined ? { transactionId: timer.transactionId } : {}),
    });
    return this;
  }

  /** A KV op in wire form, applied first and in order (see `tx.kv` of `@queen-mq/kv`). */
  kvOp(op: TransactionKvOp): this {
    this.kvOps.push(op);
    return this;
  }

  /** The request body as it will be sent. */
  toJSON(): Record<string, unknown> {
    return {
      ...(this.operations.length ? { operations: this.operations } : {}),
      ...(this.kvOps.length ? { kv: this.kvOps } : {}),
      ...(this.timerList.length ? { timers: this.timerList } : {}),
    };
  }

  /**
   * Sends it. Resolves the committed result; rejects with a QueenError
   * whose `code` is the item failure that rolled everything back
   * (`KV_MAX_EXCEEDED`, `VERSION_CONFLICT`, `LEASE_EXPIRED`, ...; `extra`
   * holds `transactionId` and e.g. `currentVersion`). Never retried once
   * sent: a resend of a committed transaction would apply its KV ops twice.
   */
  async commit(options: { signal?: AbortSignal } = {}): Promise<TransactionResult> {
    const out = (await this.queen.api.transaction({ body: this.toJSON(), idempotent: false, signal: options.signal })) as Record<string, unknown>;
    if (out.success !== true) {
      const { error, code, success: _s, results: _r, ...extra } = out;
      throw new QueenError(isErrorCode(code) ? code : 'INTERNAL_ERROR', typeof error === 'string' ? error : 'Transaction failed', { status: 200, extra });
    }
    return { kvResults: [], timerResults: [], ...out } as unknown as TransactionResult;
  }
}
