import type { TestProject } from 'vitest/node';
import { acquireCluster } from './cluster.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Admin URL of the cluster the suite uses (embedded, or DATABASE_URL). */
    queenAdminUrl: string;
  }
}

/**
 * vitest globalSetup (`globalSetup: ['@queen-mq/testing/global-setup']`): one
 * PostgreSQL for the whole run — DATABASE_URL when set, else an embedded
 * cluster in a temporary directory (fsync off: test data is throwaway),
 * stopped and removed after the run. Each startTestBroker() then creates a
 * fresh database on it.
 */
export default async function setup(project: TestProject) {
  const cluster = await acquireCluster();
  project.provide('queenAdminUrl', cluster.adminUrl);
  return () => cluster.release();
}
