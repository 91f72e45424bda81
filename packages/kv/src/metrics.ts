import { Counter } from 'prom-client';
import { metricsOf, type BrokerContext } from '@queen-mq/broker';

export interface KvMetrics {
  incrDenied: Counter;
}

const byContext = new WeakMap<BrokerContext, KvMetrics>();

/**
 * The KV's series, registered in the broker's own registry so /metrics
 * shows them: `queen_kv_incr_denied_total` counts incrs refused by `max`
 * (route and transaction).
 */
export function kvMetricsOf(ctx: BrokerContext): KvMetrics {
  let m = byContext.get(ctx);
  if (!m) {
    m = { incrDenied: new Counter({ name: 'queen_kv_incr_denied_total', help: 'KV incrs denied by max', registers: [metricsOf(ctx).registry] }) };
    byContext.set(ctx, m);
  }
  return m;
}
