import { Queen, QueenError, TransactionBuilder } from '@queen-mq/client';
import type { KvEntry, KvIncrResult, KvListResult, KvPutResult } from '@queen-mq/protocol';

// The client half of the KV: `kvClient(queen)` / `queen.kv` for standalone
// calls, `tx.kv` inside a transaction builder. Spelled kv, never state: a KV
// call made from a stream operator has only the standalone guarantees and is
// not atomic with the cycle (SEED-streams "Two things are called state").

export interface KvSetOptions {
  /** Expiry in whole seconds (1..31536000); omitted = no expiry (clears an old one). */
  ttlSeconds?: number;
  /** Compare-and-set: the key must hold this version; `0` = must be absent. Mismatch → VERSION_CONFLICT. */
  expectedVersion?: number;
}

export interface KvIncrOptions {
  /** Integer to add, may be negative. Default 1. */
  by?: number;
  /** Admission bound: a result above it is not written and answers `applied:false`. */
  max?: number;
  /** Expiry set only when this incr creates the key (a fixed-window counter). */
  ttlSeconds?: number;
}

export interface KvListOptions {
  /** Literal key prefix. */
  prefix?: string;
  /** Exclusive key cursor: the previous page's `nextAfter`. */
  after?: string;
  /** 1..1000, default 100. */
  limit?: number;
}

/**
 * The KV of one broker (PROTOCOL §6), called through the route table
 * (`queen.api.kv*`), so the URLs and shapes are the protocol's. Every failure
 * rejects with a QueenError carrying the broker's `code` (`VERSION_CONFLICT`
 * has `extra.currentVersion`, `KV_TYPE_MISMATCH`, `VALIDATION_FAILED`).
 */
export class KvClient {
  constructor(readonly queen: Queen) {}

  /** The live entry, or null when the key is absent or expired. */
  async get(namespace: string, key: string, options: { signal?: AbortSignal } = {}): Promise<KvEntry | null> {
    try {
      return await this.queen.api.kvGet({ params: { namespace, key }, signal: options.signal });
    } catch (err) {
      if (err instanceof QueenError && err.code === 'KV_NOT_FOUND') return null;
      throw err;
    }
  }

  /** Writes value and expiry; `created` tells whether the key was absent. Retried only when it is a compare-and-set. */
  set(namespace: string, key: string, value: unknown, options: KvSetOptions & { signal?: AbortSignal } = {}): Promise<KvPutResult> {
    const { signal, ...body } = options;
    return this.queen.api.kvPut({
      params: { namespace, key },
      body: { value, ...body },
      // A resent CAS fails with VERSION_CONFLICT instead of writing twice; a plain set is idempotent in value.
      idempotent: true,
      signal,
    });
  }

  /** Adds `by` (default 1); absent counts as 0. Never retried once sent: a resend would add twice. */
  incr(namespace: string, key: string, options: KvIncrOptions & { signal?: AbortSignal } = {}): Promise<KvIncrResult> {
    const { signal, ...body } = options;
    return this.queen.api.kvIncr({ params: { namespace, key }, body, idempotent: false, signal });
  }

  /** Deletes the key; `deleted:false` when it was absent. */
  async delete(namespace: string, key: string, options: { expectedVersion?: number; signal?: AbortSignal } = {}): Promise<boolean> {
    const out = await this.queen.api.kvDelete({
      params: { namespace, key },
      query: { expectedVersion: options.expectedVersion },
      idempotent: true,
      signal: options.signal,
    });
    return out.deleted;
  }

  /** One page of live keys in bytewise order; pass `nextAfter` as `after` for the next. */
  list(namespace: string, options: KvListOptions & { signal?: AbortSignal } = {}): Promise<KvListResult> {
    const { signal, ...query } = options;
    return this.queen.api.kvList({ params: { namespace }, query, signal });
  }
}

/** The KV handle of a client (the same as `queen.kv` once this package is imported). */
export function kvClient(queen: Queen): KvClient {
  return new KvClient(queen);
}

/**
 * KV ops inside a transaction: applied first (lock order rank 1) and in
 * order, atomic with the transaction's pushes, acks and timers. Each call
 * answers the builder, so chains go on (`tx.kv.incr(...).push(...)`).
 */
export class TransactionKv {
  constructor(private readonly tx: TransactionBuilder) {}

  /** Writes a value; a version mismatch (`expectedVersion`) rolls the transaction back with VERSION_CONFLICT. */
  set(namespace: string, key: string, value: unknown, options: KvSetOptions = {}): TransactionBuilder {
    return this.tx.kvOp({ op: 'set', namespace, key, value, ...options });
  }

  /**
   * Adds `by`. Over `max` it answers `applied:false` in kvResults and the
   * transaction goes on, unless `requireApplied` → KV_MAX_EXCEEDED rolls it back.
   */
  incr(namespace: string, key: string, options: KvIncrOptions & { requireApplied?: boolean } = {}): TransactionBuilder {
    return this.tx.kvOp({ op: 'incr', namespace, key, ...options });
  }

  /** Deletes a key; a version mismatch rolls the transaction back. */
  delete(namespace: string, key: string, options: { expectedVersion?: number } = {}): TransactionBuilder {
    return this.tx.kvOp({ op: 'delete', namespace, key, ...options });
  }
}

declare module '@queen-mq/client' {
  interface Queen {
    /** The KV (installed by importing `@queen-mq/kv` or `queen-mq`). */
    readonly kv: KvClient;
  }
  interface TransactionBuilder {
    /** KV ops in this transaction (installed by importing `@queen-mq/kv` or `queen-mq`). */
    readonly kv: TransactionKv;
  }
}

// Importing this package installs `queen.kv` and `tx.kv` once.
if (!Object.getOwnPropertyDescriptor(Queen.prototype, 'kv')) {
  Object.defineProperty(Queen.prototype, 'kv', {
    configurable: true,
    get(this: Queen) {
      return new KvClient(this);
    },
  });
}
if (!Object.getOwnPropertyDescriptor(TransactionBuilder.prototype, 'kv')) {
  Object.defineProperty(TransactionBuilder.prototype, 'kv', {
    configurable: true,
    get(this: TransactionBuilder) {
      return new TransactionKv(this);
    },
  });
}
