import { mkdir } from 'node:fs/promises';
import { resolve } from 'node:path';
import { readConfig, startBroker } from '@queen-mq/broker';
import { brokerComposition } from '@queen-mq/broker-composition';
import { pino } from 'pino';
import { untilAborted, type CliIO } from './io.js';

interface DevArgs {
  port?: number;
  dataDir?: string;
}

/**
 * `queen dev`: the deployable broker (the same `brokerComposition()` as
 * apps/broker) in the foreground, configured from the environment; PostgreSQL
 * is DATABASE_URL or an embedded one kept in `.queen/pg`. Logs go to stderr;
 * Ctrl-C stops it.
 */
export async function devCommand(io: CliIO, args: DevArgs): Promise<number> {
  const config = readConfig(io.env);
  const logger = pino({ level: config.logLevel }, { write: (line: string) => io.stderr.write(line) });
  const dataDir = resolve(args.dataDir ?? '.queen/pg');
  if (!config.databaseUrl) await mkdir(resolve(dataDir, '..'), { recursive: true });
  const broker = await startBroker({
    ...brokerComposition(),
    logger,
    config: { ...config, ...(args.port !== undefined ? { port: args.port } : {}) },
    embeddedDataDir: dataDir,
  });
  const where = broker.embedded ? `embedded PostgreSQL on port ${broker.embedded.port} (${dataDir})` : 'DATABASE_URL';
  io.stdout.write(`Queen broker listening on ${broker.url} (${where})\n`);
  await untilAborted(io.signal);
  io.stderr.write('shutting down\n');
  await broker.close();
  return 0;
}
