import type { Logger } from 'pino';
import type { BrokerConfig } from './config.js';
import type { Database } from './database.js';
import type { EncryptionState } from './encryption.js';
import type { BrokerMetrics } from './metrics.js';
import type { PushNotifier } from './notifier.js';
import type { PartitionDirectory } from './partitions.js';
import type { MaintenanceTaskRunner } from './retention.js';
import type { TransactionExtension } from './transaction.js';

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
  /** What feature plugins composed in (setTransactionExtension, setMaintenanceTask). */
  features: BrokerFeatures;
  /** The timer firer's own state. */
  timers: { heldWarned: boolean };
  /** The schedule firer: `wake()` ends its sleep (a schedule was created or replaced here). */
  schedules: { wake(): void };
}

/** The hooks feature plugins (the KV, the timer service) fill in when composed into a broker. */
interface BrokerFeatures {
  /** The `kv` array of a transaction; absent = refused with VALIDATION_FAILED. */
  transaction: TransactionExtension;
  /** Maintenance tasks run after the broker's own (the KV's expiry purge, the timer catch-up). */
  maintenance: Partial<Record<'kv' | 'timers', MaintenanceTaskRunner>>;
}
