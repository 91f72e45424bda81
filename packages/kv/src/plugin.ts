import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import {
  setMaintenanceTask,
  setTransactionKv,
  type BrokerContext,
  type BrokerOptions,
  type BrokerPlugin,
  type MigrationSource,
} from '@queen-mq/broker';
import { QueenError, type KvOpResult, type TxnKvOp } from '@queen-mq/protocol';
import { createKvMetrics, type KvMetrics } from './metrics.js';
import { kvHttpRoutes } from './routes.js';
import { applyKvOps, purgeExpired } from './store.js';

/** The KV's own SQL (owner `kv`): migrations for table queen.kv and its version sequence, functions in src/sql. */
export const kvMigrations: MigrationSource = {
  owner: 'kv',
  dir: fileURLToPath(new URL('../migrations', import.meta.url)),
  functions: fileURLToPath(new URL('../src/sql', import.meta.url)),
};

/**
 * A transaction's `kv` array (PROTOCOL §5.7) on the transaction's client,
 * first in lock order (rank 1). A `set`/`delete` version mismatch, a type
 * mismatch, or an incr over `max` with `requireApplied` rolls the whole
 * transaction back; an incr over `max` without it answers `applied:false`.
 */
async function transactionKv(client: Parameters<typeof applyKvOps>[0], ops: TxnKvOp[], metrics: KvMetrics): Promise<KvOpResult[]> {
  try {
    const results = await applyKvOps(client, ops);
    const denied = results.filter((r) => r.op === 'incr' && !r.applied).length;
    if (denied) metrics.incrDenied.inc(denied);
    return results.map(({ op, namespace, key, value, version, applied, deleted }) => ({ op, namespace, key, value, version, applied, deleted }));
  } catch (err) {
    // The op's QueenError rolls the transaction back (the broker answers it as success:false).
    if (err instanceof QueenError && err.code === 'KV_MAX_EXCEEDED') metrics.incrDenied.inc();
    throw err;
  }
}

/**
 * The KV as a broker feature: its routes, the `kv` ops of the transaction
 * route and the `kv` maintenance task (expired rows purged). The broker
 * package never imports this; a deployable composes it in with
 * {@link kvBrokerFeature}.
 */
export const kvPlugin: BrokerPlugin = (app: FastifyInstance, ctx: BrokerContext) => {
  const metrics = createKvMetrics(ctx.metrics.registry); // the series exists (at 0) before the first denial
  kvHttpRoutes(app, ctx, metrics);
  setTransactionKv(ctx, (client, ops) => transactionKv(client, ops, metrics));
  setMaintenanceTask(ctx, 'kv', async (client) => ({ expiredPurged: await purgeExpired(client) }));
};

/** Everything a broker needs to serve the KV: spread it into `startBroker` options. */
export function kvBrokerFeature(): Required<Pick<BrokerOptions, 'plugins' | 'migrations'>> {
  return { plugins: [kvPlugin], migrations: [kvMigrations] };
}
