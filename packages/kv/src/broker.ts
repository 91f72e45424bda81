// The broker half of the KV (`@queen-mq/kv/broker`): routes, migrations,
// transaction kv ops, the expiry purge and the KV's metrics. A deployable
// composes it into startBroker; workers never load it.
export { kvPlugin, kvMigrations, kvBrokerFeature } from './plugin.js';
