import type { Logger } from 'pino';
import type { BrokerConfig } from './config.js';
import type { Database } from '../db/database.js';
import type { EncryptionState } from '../log/encryption.js';
import type { ListingTotals } from '../maintenance/listing-totals.js';
import type { BrokerMetrics } from '../metrics/metrics.js';
import type { PushNotifier } from '../wait/notifier.js';
import type { PartitionDirectory } from '../db/partitions.js';
import type { HookedMaintenanceTask, MaintenanceTaskRunner } from '../maintenance/retention.js';
import type { TransactionKv } from '../log/transaction.js';

/**
 * What every route and service of one broker process shares. All per-broker
 * state lives here, never in module globals: tests (and embedded use) run
 * several brokers in one process, each with its own key, caches and series.
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

/** The broker's extension points, named by what they do; plugins and services fill them in. */
interface BrokerHooks {
  /** Applies the `kv` array of a transaction (PROTOCOL §5.7); absent = such a transaction is refused with VALIDATION_FAILED. */
  transactionKv?: TransactionKv;
  /** Maintenance tasks run after the broker's own retention and partition cleanup, by their protocol name. */
  maintenance: { [T in HookedMaintenanceTask]?: MaintenanceTaskRunner<T> };
}
