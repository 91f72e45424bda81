import { spawn } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '@queen-mq/broker';
import { brokerComposition } from '@queen-mq/broker-composition';
import { freshDatabase, startTestBroker, type TestBroker } from '@queen-mq/testing';

// Every `bin` of every workspace package.json, as `npm run build` leaves it:
// the file exists, is executable, starts with a node shebang, is shipped by
// `files`, and runs. Run `npm run build` first (`npm test` does).
//
// "Runs" is executed directly (the shebang and the mode, not `node file`):
// `queen --version` prints the version; every other bin is a deployable
// (the broker, the workers) and must print its first stdout line once it is
// up against a real broker, then exit 0 on SIGTERM.

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

interface Bin {
  pkg: string;
  name: string;
  /** The package's directory. */
  dir: string;
  file: string;
  files: string[];
}

function workspaceBins(): Bin[] {
  const rootPkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { workspaces: string[] };
  const out: Bin[] = [];
  for (const pattern of rootPkg.workspaces) {
    // the root lists plain `dir/*` globs
    expect(pattern, 'workspace glob').toMatch(/^[\w./-]+\/\*$/);
    const parent = join(root, pattern.slice(0, -2));
    for (const dir of readdirSync(parent)) {
      const pkgFile = join(parent, dir, 'package.json');
      if (!existsSync(pkgFile)) continue;
      const pkg = JSON.parse(readFileSync(pkgFile, 'utf8')) as { name: string; bin?: string | Record<string, string>; files?: string[] };
      const bins = typeof pkg.bin === 'string' ? { [pkg.name]: pkg.bin } : (pkg.bin ?? {});
      for (const [name, target] of Object.entries(bins)) out.push({ pkg: pkg.name, name, dir: join(parent, dir), file: join(parent, dir, target), files: pkg.files ?? [] });
    }
  }
  return out;
}

const bins = workspaceBins();

describe('workspace bins', () => {
  it('there are bins to check (the CLI and every deployable app)', () => {
    const names = bins.map((b) => b.name);
    expect(names).toContain('queen');
    expect(names).toContain('queen-broker');
    expect(names).toContain('orders-per-minute');
  });

  it.each(bins.map((b) => [`${b.pkg} ${b.name}`, b] as const))('%s points at an executable node script that its package ships', (_label, bin) => {
    const where = relative(root, bin.file);
    expect(existsSync(bin.file), `${where} is missing: run npm run build`).toBe(true);
    const st = statSync(bin.file);
    expect(st.isFile(), where).toBe(true);
    expect(st.mode & 0o111, `${where} is not executable`).toBe(0o111);
    expect(readFileSync(bin.file, 'utf8').split('\n')[0], where).toBe('#!/usr/bin/env node');
    const top = relative(bin.dir, bin.file).split('/')[0]!;
    expect(bin.files.map((f) => f.replace(/^\.\/|\/$/g, '')), `${bin.pkg} "files" must include ${top} for its bin ${bin.name}`).toContain(top);
  });
});

describe('workspace bins run', () => {
  let b: TestBroker;
  let databaseUrl: string;
  beforeAll(async () => {
    databaseUrl = await freshDatabase();
    b = await startTestBroker({ databaseUrl, ...brokerComposition() });
  });
  afterAll(async () => b?.stop());

  it('queen --version prints the CLI version', async () => {
    const bin = bins.find((x) => x.name === 'queen')!;
    const version = JSON.parse(readFileSync(join(bin.dir, 'package.json'), 'utf8')).version;
    const { code, out } = await run(bin.file, ['--version'], {});
    expect({ code, out }).toEqual({ code: 0, out: `${version}\n` });
  });

  const deployables = bins.filter((x) => x.name !== 'queen');
  it.each(deployables.map((x) => [x.name, x] as const))('%s starts against a broker, says so on stdout, and exits 0 on SIGTERM', async (_name, bin) => {
    // A second broker on the test broker's database (migrated already, with
    // the same composition, so its first stdout line is "listening"); the
    // workers use the first one.
    const env = { QUEEN_URL: b.url, DATABASE_URL: databaseUrl, QUEEN_PORT: String(await freePort()), QUEEN_HOST: '127.0.0.1', QUEEN_LOG_LEVEL: 'info' };
    const child = spawn(bin.file, [], { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
    const up = await Promise.race([
      new Promise<boolean>((resolve) => child.stdout.on('data', () => out.includes('\n') && resolve(true))),
      exited.then(() => false),
      new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 30000)),
    ]);
    if (!up) child.kill('SIGKILL');
    expect(up, `${bin.name} printed nothing within 30 s or exited; stdout: ${out}; stderr: ${err}`).toBe(true);
    // The example mains print their line just before they add their signal
    // listeners (a SIGTERM in between would end them the default way).
    await new Promise((r) => setTimeout(r, 300));
    child.kill('SIGTERM');
    expect(await exited, `stdout: ${out}; stderr: ${err}`).toEqual({ code: 0, signal: null });
  });
});

function run(file: string, args: string[], env: Record<string, string>): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const child = spawn(file, args, { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('exit', (code) => resolve({ code, out, err }));
  });
}
