import type pg from 'pg';
import type { Logger } from 'pino';
import type { MaintenanceRunResult, MaintenanceTask, TxnKvOp } from '@queen-mq/protocol';
import type { BrokerConfig } from './config.js';
import type { ClockCache } from '../db/clock-cache.js';
import type { Database } from '../db/database.js';
import type { PartitionDirectory } from '../db/partitions.js';
import type { BrokerMetrics } from '../metrics/metrics.js';
import type { PushNotifier } from '../wait/notifier.js';

/**
 * What every route and service of one broker process shares. All per-broker
 * state lives here, never in module globals: tests (and embedded use) run
 * several brokers in one process, each with its own key, caches and series.
 *
 * The context names what it holds by role. A service kept in a room below
 * this one is named by its own type; one kept in a room above (the listing
 * totals, the encryption state) is named by the small interface below, which
 * its implementation satisfies.
 */
export interface BrokerContext {
  config: BrokerConfig;
  db: Database;
  notifier: PushNotifier;
  partitions: PartitionDirectory;
  /** The listing totals: routes that write `touch` the partitions they wrote, listings `settle` before reading. */
  totals: ListingTotals;
  log: Logger;
  /** Aborted when the broker shuts down: parked pops answer 204. */
  shutdown: AbortSignal;
  expectedSchemaVersion: number;
  startedAt: number;
  version: string;
  /** This broker's Prometheus registry and series (PROTOCOL §5.10). */
  metrics: BrokerMetrics;
  /** This broker's encryption key (if any) and its cache of queue `encryptionEnabled` flags. */
  encryption: EncryptionState;
  /** The broker's extension points, as what is composed into it fills them in (setTransactionKv, setMaintenanceTask). */
  hooks: BrokerHooks;
  /** The timer firer's own state. */
  timers: { heldWarned: boolean };
  /** The schedule firer: `wake()` ends its sleep (a schedule was created or replaced here). */
  schedules: { wake(): void };
}

/**
 * The listing totals (queue_totals, group_totals) as the routes see them;
 * kept by maintenance/listing-totals.ts, which recounts in the background.
 */
export interface ListingTotals {
  /** Partitions written (committed): their shares are recounted soon. */
  touch(partitionIds: Iterable<string | null | undefined>): void;
  /** Queues changed in ways not named by partition: each of their partitions recounted, in the background. */
  touchQueues(names: Iterable<string>): void;
  /** A pop of `queue` by `group` went through this broker (it may have made the group's cursors). */
  notePop(queue: string, group: string): void;
  /** The group's cursors were deleted (on `queue`, or everywhere): its next pop makes them again. */
  groupDeleted(group: string, queue: string | null): void;
  /** What waits for a recount: partitions written, partitions of queues recounted whole, queues, leases watched. */
  readonly pending: { partitions: number; background: number; queues: number; leased: number };
  /** Before a listing answers: recounts this broker's own writes when they are few. */
  settle(): Promise<void>;
  /** Counts `queues` whole now (a page found them without totals). */
  countUncounted(queues: string[]): Promise<void>;
  /** Recounts everything pending now, the background included. */
  flush(): Promise<void>;
}

/**
 * One broker's encryption state: its key (null when none is configured) and
 * its cache of queue flags. log/encryption.ts makes it and alone reads it.
 */
export interface EncryptionState {
  /** AES-256-GCM over a payload's JSON text; `decrypt` throws on a wrong key or corrupt bytes. */
  cipher: { encrypt(payload: unknown): Buffer; decrypt(stored: Buffer): unknown } | null;
  /** Per queue: encryptionEnabled and maxSize, read together. */
  flags: ClockCache<string, QueueFlags>;
}

/** The options of a queue the push path needs, cached together. */
export interface QueueFlags {
  encrypted: boolean;
  /** maxSize; 0 = unbounded. */
  maxSize: number;
  /** When they were read (Date.now()). */
  at: number;
}

// The broker's extension points, named by what they do, never by the plugin
// that fills them in today: what is composed into a broker (the KV, ...)
// hooks its work into a transaction's `kv` array and the maintenance pass.

/**
 * Applies the `kv` array of a transaction. It runs on the transaction's
 * client, first in lock order (kv rows, rank 1), answers its result array,
 * and throws a QueenError (VERSION_CONFLICT, KV_TYPE_MISMATCH,
 * KV_MAX_EXCEEDED, ...) to roll the whole transaction back: the answer is
 * then 200 `{success:false, code, error, results:[], ...extra}`.
 */
export type TransactionKv = (client: pg.PoolClient, ops: TxnKvOp[], ctx: BrokerContext) => Promise<Record<string, unknown>[]>;

/** The maintenance tasks (PROTOCOL §3.9) that what is composed into a broker runs, the broker's own two aside. */
export type HookedMaintenanceTask = Exclude<MaintenanceTask, 'retention' | 'partitions'>;

/**
 * A maintenance task hooked into the pass (the timer catch-up, the KV's
 * expiry purge): runs in a transaction of its own within the pass, under
 * the maintenance lock, and answers its part of the pass's result.
 */
export type MaintenanceTaskRunner<T extends HookedMaintenanceTask = HookedMaintenanceTask> = (client: pg.PoolClient, ctx: BrokerContext) => Promise<MaintenanceRunResult[T]>;

/** The hooks of one broker (BrokerContext.hooks). */
interface BrokerHooks {
  /** Applies the `kv` array of a transaction (PROTOCOL §5.7); absent = such a transaction is refused with VALIDATION_FAILED. */
  transactionKv?: TransactionKv;
  /** Maintenance tasks run after the broker's own retention and partition cleanup, by their protocol name. */
  maintenance: { [T in HookedMaintenanceTask]?: MaintenanceTaskRunner<T> };
}

/** Hooks `apply` in as what a transaction's `kv` array runs through. */
export function setTransactionKv(ctx: BrokerContext, apply: TransactionKv): void {
  ctx.hooks.transactionKv = apply;
}

/** Hooks `run` into every maintenance pass as `task` (kept in ctx.hooks). */
export function setMaintenanceTask<T extends HookedMaintenanceTask>(ctx: BrokerContext, task: T, run: MaintenanceTaskRunner<T>): void {
  (ctx.hooks.maintenance as Partial<Record<T, MaintenanceTaskRunner<T>>>)[task] = run;
}
