import { mkdir } from 'node:fs/promises';
import { resolve } from 'node:path';
import pg from 'pg';
import { brokerMigrations, migrate, readConfig, startEmbeddedPostgres, type EmbeddedPostgresHandle } from '@queen-mq/broker';
import { brokerComposition } from '@queen-mq/broker-composition';
import type { CliIO } from './io.js';

interface MigrateArgs {
  dataDir?: string;
}

/**
 * `queen migrate`: applies every pending migration (the broker's and those of
 * the features the deployable composes) under the migrators' advisory lock,
 * prints what it applied, and exits. Safe to run while brokers are up.
 */
export async function migrateCommand(io: CliIO, args: MigrateArgs): Promise<number> {
  const config = readConfig(io.env);
  let embedded: EmbeddedPostgresHandle | undefined;
  let url = config.databaseUrl;
  if (!url) {
    const dataDir = resolve(args.dataDir ?? '.queen/pg');
    await mkdir(resolve(dataDir, '..'), { recursive: true });
    io.stderr.write(`DATABASE_URL not set: using the embedded PostgreSQL in ${dataDir}\n`);
    embedded = await startEmbeddedPostgres({ dataDir });
    url = embedded.url;
  }
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  try {
    const applied = await migrate(pool, [brokerMigrations, ...brokerComposition().migrations]);
    if (applied.length === 0) io.stdout.write('schema up to date, nothing applied\n');
    for (const name of applied) io.stdout.write(`applied ${name}\n`);
    return 0;
  } finally {
    await pool.end();
    await embedded?.stop();
  }
}
