import { mkdir } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { pino, type Logger } from 'pino';
import { buildApp, type BrokerPlugin } from './app.js';
import { readConfig, type BrokerConfig } from './context/config.js';
import type { BrokerContext } from './context/context.js';
import { Database } from './db/database.js';
import { checkEncryptionKey, createEncryptionState } from './log/encryption.js';
import { startEmbeddedPostgres, type EmbeddedPostgresHandle } from './db/embedded-postgres.js';
import { brokerMigrations, expectedVersion, migrate, type MigrationSource } from './db/migrate.js';
import { createMetrics } from './metrics/metrics.js';
import { PushNotifier } from './wait/notifier.js';
import { PartitionDirectory } from './db/partitions.js';
import { ListingTotalsKeeper, uncountedQueues } from './maintenance/listing-totals.js';
import { StatisticsKeeper } from './db/statistics.js';
import { retentionService } from './maintenance/retention.js';
import { scheduleService } from './maintenance/schedule-firer.js';
import { timerService } from './maintenance/timers.js';

const VERSION = '0.1.0';

export interface BrokerOptions {
  config?: Partial<BrokerConfig>;
  logger?: Logger;
  /** Extra features (the KV, ...) and the migrations they own. */
  plugins?: BrokerPlugin[];
  migrations?: MigrationSource[];
  /** Where the embedded PostgreSQL keeps its data when no databaseUrl is set. */
  embeddedDataDir?: string;
  /** Background services (besides retention, timers and schedules) started with the broker. */
  services?: ((ctx: BrokerContext) => { stop(): Promise<void> | void })[];
}

export interface RunningBroker {
  app: FastifyInstance;
  ctx: BrokerContext;
  /** http://host:port the broker listens on. */
  url: string;
  databaseUrl: string;
  embedded?: EmbeddedPostgresHandle;
  /**
   * Drains and stops: stops accepting, answers parked pops 204, waits for
   * requests in flight and background passes, closes the pool, and stops the
   * embedded PostgreSQL last. Bounding it in time is the caller's choice
   * (apps/broker exits after `shutdownTimeoutMs`).
   */
  close(): Promise<void>;
}

/**
 * Starts one broker process: PostgreSQL (the configured one, or an embedded
 * one), migrations under an advisory lock, the LISTEN connection, the HTTP
 * app and the background services. `close()` stops them in reverse order.
 */
export async function startBroker(options: BrokerOptions = {}): Promise<RunningBroker> {
  const config: BrokerConfig = { ...readConfig(), ...options.config };
  const log = options.logger ?? pino({ level: config.logLevel });

  let embedded: EmbeddedPostgresHandle | undefined;
  let databaseUrl = config.databaseUrl;
  if (!databaseUrl) {
    const dataDir = resolve(options.embeddedDataDir ?? '.queen/pg');
    await mkdir(resolve(dataDir, '..'), { recursive: true });
    log.info({ dataDir }, 'DATABASE_URL not set: starting embedded PostgreSQL');
    embedded = await startEmbeddedPostgres({ dataDir, port: Number(process.env.QUEEN_EMBEDDED_PG_PORT ?? 0) || undefined });
    databaseUrl = embedded.url;
  }

  const db = new Database(databaseUrl, config, log);
  const sources = [brokerMigrations, ...(options.migrations ?? [])];
  const applied = await migrate(db.pool, sources);
  if (applied.length) log.info({ applied }, 'migrations applied');
  db.connected = true;
  try {
    await checkEncryptionKey(db, config.encryptionKey);
  } catch (err) {
    await db.close();
    await embedded?.stop();
    throw err;
  }

  const statistics = new StatisticsKeeper(db, log);
  const notifier = new PushNotifier(databaseUrl, log, db);
  await notifier.start();

  const shutdown = new AbortController();
  const totals = new ListingTotalsKeeper(db, log, config.listingTotalsMs);
  const ctx: BrokerContext = {
    config,
    db,
    notifier,
    partitions: new PartitionDirectory(db, undefined, (n) => statistics.noteCreated(n)),
    totals,
    log,
    shutdown: shutdown.signal,
    expectedSchemaVersion: await expectedVersion(brokerMigrations),
    startedAt: Date.now(),
    version: VERSION,
    metrics: createMetrics({ db, log, config, totals }),
    encryption: createEncryptionState(config.encryptionKey),
    hooks: { maintenance: {} },
    timers: { heldWarned: false },
    // Replaced by the schedule firer when it starts.
    schedules: { wake: () => undefined },
  };
  notifier.onPartitionsWritten = (ids) => totals.touch(ids);
  const app = await buildApp(ctx, options.plugins);
  await app.listen({ port: config.port, host: config.host });
  const address = app.server.address() as { port: number };
  const host = config.host === '0.0.0.0' || config.host === '::' ? 'localhost' : config.host;
  const url = `http://${host}:${address.port}`;
  const services = [retentionService, timerService, scheduleService, ...(options.services ?? [])].map((start) => start(ctx));
  // Queues without totals yet (made before migration 029, or by SQL) are counted whole, in the background.
  void uncountedQueues(db)
    .then((names) => totals.addUncounted(names))
    .catch((err: unknown) => log.warn({ err }, 'queues without listing totals not looked up'));

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      // Stop accepting (the listening socket closes; idle keep-alive
      // connections too), answer parked pops 204, and let requests in flight
      // and background passes finish on a pool that is still open.
      const httpClosed = app.close();
      shutdown.abort();
      notifier.wakeAll();
      await Promise.all([...services.map((s) => s.stop()), totals.stop()]);
      await httpClosed;
      await notifier.close();
      await db.close();
      // Last: everything above may still have needed it.
      await embedded?.stop();
    })());

  return { app, ctx, url, databaseUrl, embedded, close };
}
