import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import {
  setMaintenanceTask,
  setTransactionExtension,
  TransactionItemError,
  type BrokerContext,
  type BrokerOptions,
  type BrokerPlugin,
  type MigrationSource,
} from '@queen-mq/broker';
import type { KvOpResult, TxnKvOp } from '@queen-mq/protocol';
import { kvMetricsOf } from './metrics.js';
import { kvHttpRoutes } from './routes.js';
import { applyKvOps, KvOpFailure, purgeExpired } from './store.js';

/** The KV's own numbered migrations (owner `kv`): table queen.kv, its version sequence and SQL functions. */
export const kvMigrations: MigrationSource = {
  owner: 'kv',
  dir: fileURLToPath(new URL('../migrations', import.meta.url)),
};

/**
 * A transaction's `kv` array (PROTOCOL §5.7) on the transaction's client,
 * first in lock order (rank 1). A `set`/`delete` version mismatch, a type
 * mismatch, or an incr over `max` with `requireApplied` rolls the whole
 * transaction back; an incr over `max` without it answers `applied:false`.
 */
async function transactionKv(client: Parameters<typeof applyKvOps>[0], ops: TxnKvOp[], ctx: BrokerContext): Promise<KvOpResult[]> {
  try {
    const results = await applyKvOps(client, ops);
    const denied = results.filter((r) => r.op === 'incr' && !r.applied).length;
    if (denied) kvMetricsOf(ctx).incrDenied.inc(denied);
    return results.map(({ op, namespace, key, value, version, applied, deleted }) => ({ op, namespace, key, value, version, applied, deleted }));
  } catch (err) {
    if (err instanceof KvOpFailure) {
      if (err.code === 'KV_MAX_EXCEEDED') kvMetricsOf(ctx).incrDenied.inc();
      throw new TransactionItemError(err.code, err.message, err.extra);
    }
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
  kvHttpRoutes(app, ctx);
  kvMetricsOf(ctx); // the series exists (at 0) before the first denial
  setTransactionExtension(ctx, { kv: transactionKv });
  setMaintenanceTask(ctx, 'kv', (client) => purgeExpired(client));
};

/** Everything a broker needs to serve the KV: spread it into `startBroker` options. */
export function kvBrokerFeature(): Required<Pick<BrokerOptions, 'plugins' | 'migrations'>> {
  return { plugins: [kvPlugin], migrations: [kvMigrations] };
}
