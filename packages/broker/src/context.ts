import type { Logger } from 'pino';
import type { BrokerConfig } from './config.js';
import type { Database } from './database.js';
import type { PushNotifier } from './notifier.js';
import type { PartitionDirectory } from './partitions.js';

/** What every route and service of one broker process shares. */
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
}
