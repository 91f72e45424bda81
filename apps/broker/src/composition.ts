import type { BrokerOptions } from '@queen-mq/broker';

/**
 * What this deployable adds to the bare broker: feature plugins, their
 * migrations and background services. The broker package itself imports none
 * of them (the KV, for one, is composed in here).
 */
export function brokerComposition(): Pick<BrokerOptions, 'plugins' | 'migrations' | 'services'> {
  return { plugins: [], migrations: [], services: [] };
}
