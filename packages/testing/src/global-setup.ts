import { mkdtemp, chmod } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { startEmbeddedPostgres } from '@queen-mq/broker';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Admin URL of the cluster the suite uses (embedded, or DATABASE_URL). */
    queenAdminUrl: string;
  }
}

/**
 * One PostgreSQL for the whole run: DATABASE_URL when set, else an embedded
 * cluster in a temporary directory (fsync off: test data is throwaway). Each
 * test file then creates its own fresh database on it.
 */
export default async function setup(project: TestProject) {
  const external = process.env.DATABASE_URL || process.env.QUEEN_DATABASE_URL;
  if (external) {
    project.provide('queenAdminUrl', external);
    return;
  }
  const dir = await mkdtemp(join(tmpdir(), 'queen-test-'));
  await chmod(dir, 0o755);
  const pg = await startEmbeddedPostgres({ dataDir: join(dir, 'pg'), persistent: false, unsafeFast: true });
  project.provide('queenAdminUrl', pg.url);
  return async () => {
    await pg.stop();
  };
}
