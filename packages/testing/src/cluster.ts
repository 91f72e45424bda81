import { mkdtemp, chmod, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startEmbeddedPostgres, type EmbeddedPostgresHandle } from '@queen-mq/broker';

/** Where the PostgreSQL cluster of this process comes from, in order of preference. */
export type ClusterSource = 'vitest-global-setup' | 'DATABASE_URL' | 'embedded';

export interface Cluster {
  /** Admin URL: databases are created through it. */
  adminUrl: string;
  source: ClusterSource;
  /** Gives the cluster back: the last user of an embedded one stops it. */
  release(): Promise<void>;
}

/**
 * The URL the vitest globalSetup of `@queen-mq/testing/global-setup` provided,
 * if this code runs in a vitest worker whose config has that globalSetup.
 * Outside vitest (or without vitest installed) there is none.
 */
async function providedByVitest(): Promise<string | undefined> {
  try {
    const vitest = await import('vitest');
    return (vitest.inject as (key: string) => string | undefined)('queenAdminUrl') || undefined;
  } catch {
    // Not in a vitest worker (inject throws), or vitest is not installed.
    return undefined;
  }
}

/** The cluster this run was handed (vitest globalSetup, then DATABASE_URL), if any: no embedded start. */
export async function providedCluster(): Promise<{ adminUrl: string; source: Exclude<ClusterSource, 'embedded'> } | undefined> {
  const provided = await providedByVitest();
  if (provided) return { adminUrl: provided, source: 'vitest-global-setup' };
  const external = process.env.DATABASE_URL || process.env.QUEEN_DATABASE_URL;
  if (external) return { adminUrl: external, source: 'DATABASE_URL' };
  return undefined;
}

let embedded: { starting: Promise<{ pg: EmbeddedPostgresHandle; dir: string }>; users: number } | undefined;

/**
 * Takes the cluster for a test: the vitest globalSetup's (one per run), else
 * `DATABASE_URL` / `QUEEN_DATABASE_URL`, else an embedded PostgreSQL in a
 * temporary directory that this process starts on first use (fsync off: test
 * data is throwaway) and stops when the last user releases it.
 */
export async function acquireCluster(): Promise<Cluster> {
  const provided = await providedCluster();
  if (provided) return { ...provided, release: async () => undefined };

  if (!embedded) {
    const starting = (async () => {
      const dir = await mkdtemp(join(tmpdir(), 'queen-test-'));
      // The embedded PostgreSQL runs as a `postgres` user when we are root.
      await chmod(dir, 0o755);
      const pg = await startEmbeddedPostgres({ dataDir: join(dir, 'pg'), persistent: false, unsafeFast: true });
      return { pg, dir };
    })();
    embedded = { starting, users: 0 };
    starting.catch(() => {
      if (embedded?.starting === starting) embedded = undefined;
    });
  }
  const mine = embedded;
  mine.users += 1;
  let started: { pg: EmbeddedPostgresHandle; dir: string };
  try {
    started = await mine.starting;
  } catch (err) {
    mine.users -= 1;
    throw err;
  }
  let released = false;
  return {
    adminUrl: started.pg.url,
    source: 'embedded',
    async release() {
      if (released) return;
      released = true;
      mine.users -= 1;
      if (mine.users > 0) return;
      if (embedded === mine) embedded = undefined;
      await started.pg.stop();
      await rm(started.dir, { recursive: true, force: true });
    },
  };
}
