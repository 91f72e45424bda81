export { kvPlugin, kvMigrations, kvBrokerFeature } from './plugin.js';
export { kvHttpRoutes } from './routes.js';
export { applyKvOps, getEntry, listEntries, purgeExpired, KvOpFailure, type AppliedOp, type KvWireOp } from './store.js';
export { KvClient, kvClient, TransactionKv, type KvSetOptions, type KvIncrOptions, type KvListOptions } from './client.js';
export { kvMetricsOf, type KvMetrics } from './metrics.js';
