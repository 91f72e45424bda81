import type { BrokerOptions } from '@queen-mq/broker';
import { kvBrokerFeature } from '@queen-mq/kv';

/**
 * What this deployable adds to the bare broker: feature plugins, their
 * migrations and background services. The broker package itself imports none
 * of them (the KV, for one, is composed in here; it registers its own
 * maintenance task, the expiry purge, when its plugin loads).
 */
export function brokerComposition(): Pick<BrokerOptions, 'plugins' | 'migrations' | 'services'> {
  const kv = kvBrokerFeature();
  return { plugins: [...kv.plugins], migrations: [...kv.migrations], services: [] };
}
