import { Counter, type Registry } from 'prom-client';

export interface KvMetrics {
  incrDenied: Counter;
}

/**
 * The KV's series, registered in the broker's own registry so /metrics
 * shows them: `queen_kv_incr_denied_total` counts incrs refused by `max`
 * (route and transaction). Made once per broker, when the plugin is composed in.
 */
export function createKvMetrics(registry: Registry): KvMetrics {
  return { incrDenied: new Counter({ name: 'queen_kv_incr_denied_total', help: 'KV incrs denied by max', registers: [registry] }) };
}
