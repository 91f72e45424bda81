#!/usr/bin/env node
// The deployable broker: configuration from the environment (README table),
// embedded PostgreSQL in ./.queen/pg when DATABASE_URL is not set.
// First: it must run before the other modules load (young-generation.ts).
import './young-generation.js';
import { startBroker } from '@queen-mq/broker';
import { pino } from 'pino';
import { brokerComposition } from '@queen-mq/broker-composition';

const log = pino({ level: process.env.QUEEN_LOG_LEVEL ?? 'info' });

try {
  const broker = await startBroker({ logger: log, ...brokerComposition() });
  const timeoutMs = broker.ctx.config.shutdownTimeoutMs;
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) {
      // A second Ctrl-C means "now": the embedded PostgreSQL still gets its SIGINT on exit.
      log.warn({ signal }, 'second signal while draining: exiting now');
      process.exit(1);
    }
    stopping = true;
    log.info({ signal, timeoutMs }, 'shutting down: draining requests in flight');
    const deadline = setTimeout(() => {
      log.error({ timeoutMs }, 'shutdown deadline passed: exiting with work unfinished');
      process.exit(1);
    }, timeoutMs);
    try {
      await broker.close();
    } catch (err) {
      log.error({ err }, 'shutdown failed');
      process.exit(1);
    }
    clearTimeout(deadline);
    log.info('stopped');
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
  // Last, once SIGTERM is handled: whoever waits for this line may stop the broker right away.
  log.info({ url: broker.url, database: broker.embedded ? `embedded PostgreSQL on port ${broker.embedded.port}` : 'DATABASE_URL' }, `Queen broker listening on ${broker.url}`);
} catch (err) {
  log.fatal({ err }, `broker failed to start: ${(err as Error).message}`);
  process.exit(1);
}
