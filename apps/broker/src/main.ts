#!/usr/bin/env node
// The deployable broker: configuration from the environment (README table),
// embedded PostgreSQL in ./.queen/pg when DATABASE_URL is not set.
import { startBroker } from '@queen-mq/broker';
import { pino } from 'pino';
import { brokerComposition } from './composition.js';

const log = pino({ level: process.env.QUEEN_LOG_LEVEL ?? 'info' });

try {
  const broker = await startBroker({ logger: log, ...brokerComposition() });
  log.info({ url: broker.url, database: broker.embedded ? `embedded PostgreSQL on port ${broker.embedded.port}` : 'DATABASE_URL' }, `Queen broker listening on ${broker.url}`);
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    await broker.close();
    log.info('stopped');
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
} catch (err) {
  log.fatal({ err }, `broker failed to start: ${(err as Error).message}`);
  process.exit(1);
}
