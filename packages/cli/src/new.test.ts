import { existsSync, mkdtempSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { CliIO } from './io.js';
import { main } from './main.js';
import { workerFiles } from './new-worker.js';
import { VERSION } from './version.js';

// `queen new worker <name>` against a scratch "repository root" (the two
// root files the template needs); the generated worker itself is built and
// tested by tools/nx-plugin/worker/generator.test.ts.

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

function scratchRoot(): string {
  const root = mkdtempSync(join(tmpdir(), 'queen-new-'));
  dirs.push(root);
  mkdirSync(join(root, 'tools'));
  writeFileSync(join(root, 'tsconfig.base.json'), '{}');
  writeFileSync(join(root, 'tools', 'bins-executable.mjs'), '');
  return root;
}

async function run(argv: string[]) {
  const out = { stdout: '', stderr: '' };
  const io: CliIO = { stdout: { write: (s: string) => (out.stdout += s) }, stderr: { write: (s: string) => (out.stderr += s) }, env: {} };
  const code = await main(argv, io);
  return { code, ...out };
}

const listFiles = (dir: string, prefix = ''): string[] =>
  readdirSync(join(dir, prefix), { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? listFiles(dir, join(prefix, e.name)) : [join(prefix, e.name)]));

describe('queen new worker', () => {
  it('writes apps/<name> (the template, nothing else) and prints the next steps', async () => {
    const root = scratchRoot();
    const r = await run(['new', 'worker', 'orders-per-hour', '--root', root]);
    expect(r).toMatchObject({ code: 0, stderr: '' });
    const expected = workerFiles('orders-per-hour');
    expect(listFiles(join(root, 'apps', 'orders-per-hour')).sort()).toEqual(expected.map((f) => f.path.replace('apps/orders-per-hour/', '')).sort());
    for (const f of expected) expect(readFileSync(join(root, f.path), 'utf8')).toBe(f.content);
    expect(r.stdout).toContain('created apps/orders-per-hour/src/main.ts\n');
    expect(r.stdout).toContain('npx nx build orders-per-hour');

    const pkg = JSON.parse(readFileSync(join(root, 'apps/orders-per-hour/package.json'), 'utf8'));
    expect(pkg).toMatchObject({
      name: 'orders-per-hour',
      private: true,
      bin: { 'orders-per-hour': './dist/main.js' },
      dependencies: { 'queen-mq': VERSION },
      devDependencies: { '@queen-mq/testing': VERSION },
    });
    expect(pkg.scripts.build).toBe('tsc -p tsconfig.json && node ../../tools/bins-executable.mjs');
    const worker = readFileSync(join(root, 'apps/orders-per-hour/src/worker.ts'), 'utf8');
    expect(worker).toContain(".windowTumbling(");
    expect(worker).toContain("queen.queue(options.source ?? 'orders-per-hour.in')");
  });

  it('refuses an existing folder (exit 4) and writes nothing into it', async () => {
    const root = scratchRoot();
    mkdirSync(join(root, 'apps', 'taken'), { recursive: true });
    writeFileSync(join(root, 'apps', 'taken', 'keep.txt'), 'mine');
    const r = await run(['new', 'worker', 'taken', '--root', root]);
    expect(r).toEqual({ code: 4, stdout: '', stderr: 'queen new worker: apps/taken exists already; nothing written\n' });
    expect(readdirSync(join(root, 'apps', 'taken'))).toEqual(['keep.txt']);
  });

  it('refuses a bad name, an unknown kind and a directory that is not the repository root (exit 2)', async () => {
    const root = scratchRoot();
    for (const name of ['Orders', 'orders_x', 'a', 'x-', '1x', 'x--y', 'x/y', 'x'.repeat(51)]) {
      const r = await run(['new', 'worker', name, '--root', root]);
      expect(r.code, name).toBe(2);
      expect(r.stderr, name).toContain('a worker name is lower-case words joined by dashes');
    }
    expect((await run(['new', 'window', 'x-y', '--root', root])).stderr).toContain('new: unknown kind "window" (there is one: worker)');
    const bare = mkdtempSync(join(tmpdir(), 'queen-new-'));
    dirs.push(bare);
    const r = await run(['new', 'worker', 'fine', '--root', bare]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('is not the repository root (no tsconfig.base.json, tools/bins-executable.mjs)');
    expect(existsSync(join(root, 'apps'))).toBe(false);
    expect(existsSync(join(bare, 'apps'))).toBe(false);
  });
});
