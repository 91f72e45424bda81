import type { CompiledQuery } from './compile.js';
import type { RunnerEmitter } from './events.js';
import type { PartitionLocks } from './partition-lock.js';
import type { StreamsApi } from './state-api.js';

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
  /** Event-time messages dropped as late (onLate 'drop'). */
  lateEventsTotal: number;
  /** Failures reported to onError. */
  errorsTotal: number;
  /** Gate evaluations that allowed, in committed cycles. */
  gateAllowsTotal: number;
  /** Gate evaluations that denied. */
  gateDenialsTotal: number;
}

/** A partition the runner has processed recently (idle flush candidates). */
export interface TouchedPartition {
  partition: string;
  lastTouchedMs: number;
  /**
   * A batch of this partition ended without a commit and will be redelivered
   * when its lease expires; the idle flush leaves the partition alone until a
   * cycle commits, or it could close a window those messages belong to.
   */
  awaitingRedelivery?: boolean;
}

/** Shared by the pop loop, the cycle and the idle flush of one runner. */
export interface RunnerContext {
  plan: CompiledQuery;
  /** The server's query UUID. */
  queryId: string;
  consumerGroup: string;
  api: StreamsApi;
  locks: PartitionLocks;
  events: RunnerEmitter;
  metrics: RunMetrics;
  touched: Map<string, TouchedPartition>;
  report(err: unknown, info: ErrorInfo): void;
  isStopped(): boolean;
}
