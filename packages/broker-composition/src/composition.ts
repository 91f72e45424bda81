import type { BrokerOptions } from '@queen-mq/broker';
import { consolePlugin } from '@queen-mq/console';
import { kvBrokerFeature } from '@queen-mq/kv/broker';

/**
 * What a deployed broker adds to the bare `@queen-mq/broker`: feature
 * plugins, their migrations and background services, to spread into
 * `startBroker` (or hand to `migrate`). The broker package imports none of
 * them; `apps/broker`, `queen dev` and `queen migrate` all take this one list,
 * so the dev broker and the deployed one serve the same routes over the same
 * schema. Today that is the KV, whose plugin also registers its maintenance
 * task (the expiry purge) when it loads, and the operator's console at
 * `/console` (static pages over the broker's own read routes).
 */
export function brokerComposition(): Required<Pick<BrokerOptions, 'plugins' | 'migrations' | 'services'>> {
  const kv = kvBrokerFeature();
  return { plugins: [...kv.plugins, consolePlugin()], migrations: [...kv.migrations], services: [] };
}
