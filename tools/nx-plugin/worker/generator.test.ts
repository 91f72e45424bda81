import { spawn } from 'node:child_process';
import { copyFileSync, cpSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { workerFiles } from '@queen-mq/cli/new-worker';

// `npx nx g ./tools/nx-plugin:worker <name>` as a user runs it, in a scratch
// copy of the repository's root (nx.json, tsconfig.base.json, tools/, the
// installed node_modules): then `nx build <name>` and the generated worker's
// own tests, against this run's PostgreSQL. Nothing is left in apps/. Needs
// `npm run build` first (the generated worker imports the built packages).
// About 25 s alone; the timeout leaves room for a loaded machine (80 s in a
// full run on two shared cores).

const repo = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const nx = join(repo, 'node_modules', 'nx', 'dist', 'bin', 'nx.js');
const vitest = join(repo, 'node_modules', 'vitest', 'vitest.mjs');
const scratch = mkdtempSync(join(tmpdir(), 'queen-worker-gen-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function sh(args: string[], cwd: string, env: Record<string, string> = {}): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { cwd, env: { ...process.env, NX_DAEMON: 'false', NX_NO_CLOUD: 'true', NX_TUI: 'false', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    // CI forces colour (FORCE_COLOR): compare the text, not the escapes
    child.on('exit', (code) => resolve({ code, out: out.replace(/\x1b\[[0-9;]*m/g, '') }));
  });
}

describe('nx generator ./tools/nx-plugin:worker', () => {
  it('scaffolds apps/<name> that builds, has an executable bin, and passes its own tests against the embedded broker', async () => {
    for (const f of ['nx.json', 'tsconfig.base.json']) copyFileSync(join(repo, f), join(scratch, f));
    cpSync(join(repo, 'tools'), join(scratch, 'tools'), { recursive: true });
    symlinkSync(join(repo, 'node_modules'), join(scratch, 'node_modules'), 'dir');
    writeFileSync(join(scratch, 'package.json'), JSON.stringify({ name: 'scratch', private: true, type: 'module', workspaces: ['apps/*'] }));

    const gen = await sh([nx, 'g', './tools/nx-plugin:worker', 'orders-per-hour'], scratch);
    expect(gen, gen.out).toMatchObject({ code: 0 });
    const files = workerFiles('orders-per-hour');
    for (const f of files) {
      expect(gen.out).toContain(`CREATE ${f.path}`);
      expect(readFileSync(join(scratch, f.path), 'utf8')).toBe(f.content);
    }
    expect(gen.out).toContain('npx nx build orders-per-hour');

    // a second run refuses and changes nothing
    writeFileSync(join(scratch, 'apps/orders-per-hour/src/worker.ts'), '// edited\n');
    const again = await sh([nx, 'g', './tools/nx-plugin:worker', 'orders-per-hour'], scratch);
    expect(again.code).not.toBe(0);
    expect(again.out).toContain('apps/orders-per-hour exists already; nothing written');
    expect(readFileSync(join(scratch, 'apps/orders-per-hour/src/worker.ts'), 'utf8')).toBe('// edited\n');
    writeFileSync(join(scratch, 'apps/orders-per-hour/src/worker.ts'), files.find((f) => f.path.endsWith('src/worker.ts'))!.content);

    const build = await sh([nx, 'build', 'orders-per-hour', '--output-style=stream', '--skip-nx-cache'], scratch);
    expect(build, build.out).toMatchObject({ code: 0 });
    const bin = join(scratch, 'apps/orders-per-hour/dist/main.js');
    expect(statSync(bin).mode & 0o111).toBe(0o111);
    expect(readFileSync(bin, 'utf8').split('\n')[0]).toBe('#!/usr/bin/env node');

    // its tests, as `npm test -w orders-per-hour` runs them (its own vitest.config.ts), on this run's PostgreSQL
    const test = await sh([vitest, 'run'], join(scratch, 'apps/orders-per-hour'), { DATABASE_URL: inject('queenAdminUrl'), QUEEN_DATABASE_URL: '' });
    expect(test, test.out).toMatchObject({ code: 0 });
    expect(test.out).toMatch(/Tests\s+2 passed \(2\)/);
  }, 150000);
});
