import type { CompiledQuery } from '../plan/compile.js';
import type { RunnerEmitter } from './events.js';
import type { PartitionLocks } from './partition-lock.js';
import type { StreamsApi } from './state-api.js';
import type { BrokerClock } from './broker-clock.js';

/** Where a failure happened, as reported to `onError`. */
export type ErrorPhase = 'register' | 'pop' | 'state-get' | 'window-apply' | 'operator' | 'gate-eval' | 'cycle' | 'flush' | 'lease-extend';

export interface ErrorInfo {
  phase: ErrorPhase;
  partitionId?: string;
  offset?: string;
}

/** Counters of one runner since it started. */
export interface RunMetrics {
  /** Cycles committed with a source ack. */
  cyclesTotal: number;
  /** Idle-flush cycles committed (ack:null). */
  flushCyclesTotal: number;
  /** Source messages acknowledged by committed cycles. */
  messagesTotal: number;
  /**
   * Messages late and not folded (their window was already emitted; event
   * time or processing time): dropped (onLate 'drop') or handed to the onLate
   * sink as late records.
   */
  lateEventsTotal: number;
  /** Failures reported to onError. */
  errorsTotal: number;
  /** Gate evaluations that allowed, in committed cycles. */
  gateAllowsTotal: number;
  /** Gate evaluations that denied. */
  gateDenialsTotal: number;
  /** Failed deliveries charged to poison messages that were then redelivered (below the queue's retryLimit). */
  poisonRetriesTotal: number;
  /** Poison messages dead-lettered (retryLimit exhausted); each also logged and emitted as `message:dead-lettered`. */
  messagesDeadLetteredTotal: number;
  /** Window emits dead-lettered (a post-window operator or the sink's mapping threw); each also logged and emitted as `emit:dead-lettered`. */
  emitsDeadLetteredTotal: number;
  /** Window emits the sink answered `duplicate` in a committed cycle or flush (a window closed twice); each also reported as WINDOW_REEMITTED. */
  windowsReemittedTotal: number;
  /** Cycles and flushes a sink queue at its maxSize refused (QUEUE_FULL; each one waited and was tried again, see `sink:full`). */
  sinkFullTotal: number;
}

/** Where the runner writes its log lines (a pino logger fits; default `console`). */
export interface RunnerLogger {
  warn(message: string): void;
}

/**
 * A partition in the idle-flush set: it may hold open windows. It stays in
 * the set until a flush finds no open row on it (see idle-flush.ts).
 */
export interface TouchedPartition {
  partition: string;
  /** The runner's local clock when a cycle last touched it (or when it was seeded). */
  lastTouchedMs: number;
  /**
   * A batch of this partition ended without a known commit: it will be
   * redelivered when its lease expires, or — if the answer was lost — it did
   * commit. The idle flush leaves the partition alone until a cycle commits
   * or the source group is seen caught up on it by a lag read started after
   * `markedAt`; either way, nothing of that batch is pending any more.
   */
  awaitingRedelivery?: boolean;
  /** performance.now() when awaitingRedelivery was set. */
  markedAt?: number;
}

/** A join shard that may hold records (joins/join-idle-flush.ts): it stays watched until a read finds it holding none. */
export interface HeldJoinShard {
  partition: string;
  /** Broker time past which a held record may leave on the clock alone; undefined: not known yet (its `__join__` row is read). */
  expiresAt?: number;
}

/** Shared by the pop loop, the cycle and the idle flush of one runner. */
export interface RunnerContext {
  plan: CompiledQuery;
  /** The server's query UUID. */
  queryId: string;
  /** The registered version this runner commits as (sent on every cycle); null when the broker keeps none. */
  version: string | null;
  /** Stops the runner's loops (another version of the query took over). */
  halt(): void;
  /** The query's name (`options.queryId`). */
  queryName: string;
  consumerGroup: string;
  api: StreamsApi;
  locks: PartitionLocks;
  events: RunnerEmitter;
  metrics: RunMetrics;
  touched: Map<string, TouchedPartition>;
  /** A join's shards that may hold records, by shard id: the join's idle flush looks at these. */
  joinHeld: Map<string, HeldJoinShard>;
  /** The join's idle flush interval (ms): its option in processing time, against a broker that guards it (`flush_sources`); else 0, off. */
  joinIdleFlushMs: number;
  /** The broker's clock: processing-time windows close on it. */
  clock: BrokerClock;
  logger: RunnerLogger;
  report(err: unknown, info: ErrorInfo): void;
  isStopped(): boolean;
  /**
   * A join's partner pop: the other queue's pending messages of a partition
   * name, leased (without waiting), so one cycle commits both sides and both
   * acks; null when that partition has none or is leased elsewhere. `done()`
   * stops extending the partner's lease.
   */
  joinPartner?: (side: 'left' | 'right', partition: string) => Promise<{ batch: PartitionBatchLike; done: () => void } | null>;
  /** Aborts when the runner stops: waits end early on it. */
  signal: AbortSignal;
}

/** A batch as the join's partner pop answers it (commit's PartitionBatch, restated here below the commit room). */
interface PartitionBatchLike {
  partitionId: string;
  partition: string;
  leaseId: string;
  messages: import('./source-message.js').SourceMessage[];
  side?: 'left' | 'right';
}

/**
 * A runner's own map in `store` (partition id → what one module keeps about
 * it), made on first use; it goes when the runner's context does.
 */
export function perRunner<V>(store: WeakMap<RunnerContext, Map<string, V>>, rt: RunnerContext): Map<string, V> {
  let m = store.get(rt);
  if (!m) store.set(rt, (m = new Map()));
  return m;
}
