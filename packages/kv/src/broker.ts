// The broker half of the KV (`@queen-mq/kv/broker`): routes, migrations,
// transaction kv ops, the expiry purge and the KV's metrics. A deployable
// composes it into startBroker; workers never load it.
export { kvPlugin, kvMigrations, kvBrokerFeature } from './plugin.js';
export { kvHttpRoutes } from './routes.js';
export { applyKvOps, getEntry, listEntries, purgeExpired, KvOpFailure, type AppliedOp, type KvWireOp } from './store.js';
export { kvMetricsOf, type KvMetrics } from './metrics.js';
