// What `queen new worker <name>` and the nx generator (tools/nx-plugin) write:
// a stream worker as a workspace of this repository's `apps/` folder. One
// template, two front ends; the files below are the whole of it.
import { UsageError } from './usage.js';
import { VERSION } from './version.js';

/** One file to create, its path relative to the repository root. */
interface WorkerFile {
  path: string;
  content: string;
}

/** The folder a generated worker goes to, relative to the repository root. */
export const WORKER_PARENT = 'apps';

/**
 * Files the template relies on at the repository root: the generated
 * tsconfig extends the first, its build script runs the second.
 */
export const WORKER_ROOT_FILES = ['tsconfig.base.json', 'tools/bins-executable.mjs'] as const;

/**
 * Throws a UsageError unless `name` can be a folder, an npm package name, a
 * bin and the start of queue names at once: lower-case words joined by
 * single dashes, 2 to 50 characters.
 */
function checkWorkerName(name: string): void {
  if (!/^[a-z][a-z0-9]*(-[a-z0-9]+)*$/.test(name) || name.length < 2 || name.length > 50) {
    throw new UsageError(`a worker name is lower-case words joined by dashes (like "orders-per-hour"), 2 to 50 characters; got "${name}"`);
  }
}

/**
 * The files of worker `name` under `apps/<name>/`: a chain (read a queue,
 * a tumbling window, sink to a queue), a `main` that stops on SIGTERM, a test
 * against a real broker, and the build wiring. `version` is the one of
 * `queen-mq` and `@queen-mq/testing` it depends on (this CLI's own: the
 * packages are released together).
 */
export function workerFiles(name: string, version: string = VERSION): WorkerFile[] {
  checkWorkerName(name);
  const dir = `${WORKER_PARENT}/${name}`;
  const file = (path: string, content: string): WorkerFile => ({ path: `${dir}/${path}`, content });
  return [
    file('package.json', packageJson(name, version)),
    file('tsconfig.json', TSCONFIG),
    file('vitest.config.ts', vitestConfig(name)),
    file('README.md', readme(name)),
    file('src/index.ts', INDEX),
    file('src/worker.ts', worker(name)),
    file('src/main.ts', main(name)),
    file('src/worker.test.ts', workerTest(name)),
  ];
}

/** What to do after the files exist, for the person who asked for them. */
export function workerNextSteps(name: string): string {
  const steps: [string, string][] = [
    ['npm install', 'links the new workspace and records it in package-lock.json'],
    [`npx nx build ${name}`, 'dist/, with the bin dist/main.js'],
    [`npm test -w ${name}`, 'its tests, against an embedded PostgreSQL (or DATABASE_URL)'],
    ['npm start', 'in another terminal: a broker on :6632'],
    [`node ${WORKER_PARENT}/${name}/dist/main.js`, 'the worker; SIGTERM (Ctrl-C) stops it cleanly'],
  ];
  const width = Math.max(...steps.map(([cmd]) => cmd.length)) + 2;
  return `Next:\n${steps.map(([cmd, why]) => `  ${cmd.padEnd(width)}# ${why}\n`).join('')}See ${WORKER_PARENT}/${name}/README.md for its settings, replicas and what to watch.\n`;
}

const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;

function packageJson(name: string, version: string): string {
  return json({
    name,
    version: '0.1.0',
    description: `Stream worker: counts and sums the messages of ${name}.in per one-minute window onto ${name}.out.`,
    type: 'module',
    private: true,
    engines: { node: '>=20' },
    main: './dist/index.js',
    types: './dist/index.d.ts',
    exports: { '.': { types: './dist/index.d.ts', default: './dist/index.js' } },
    bin: { [name]: './dist/main.js' },
    files: ['dist', 'README.md'],
    scripts: {
      build: 'tsc -p tsconfig.json && node ../../tools/bins-executable.mjs',
      start: 'node dist/main.js',
      test: 'vitest run',
    },
    dependencies: { 'queen-mq': version },
    devDependencies: { '@queen-mq/testing': version },
  });
}

const TSCONFIG = json({
  extends: '../../tsconfig.base.json',
  compilerOptions: { outDir: 'dist', rootDir: 'src' },
  include: ['src/**/*.ts'],
  exclude: ['src/**/*.test.ts'],
});

function vitestConfig(name: string): string {
  return `import { defineConfig } from 'vitest/config';

// \`npm test -w ${name}\` (or \`npx vitest run\` in this folder): the worker's
// tests against one PostgreSQL for the run, DATABASE_URL or an embedded one
// (started by @queen-mq/testing's global setup). The repository's \`npm test\`
// runs them too, with its own configuration.
export default defineConfig({
  test: {
    include: ['src/**/*.test.ts'],
    globalSetup: ['@queen-mq/testing/global-setup'],
    testTimeout: 60000,
    hookTimeout: 60000,
  },
});
`;
}

const INDEX = `export { runWorker, type WorkerOptions } from './worker.js';
`;

function worker(name: string): string {
  return `import { Queen, Stream, type RunHandle } from 'queen-mq';

/** Options of {@link runWorker}; every replica of the worker passes the same ones. */
export interface WorkerOptions {
  /** Broker URL, e.g. \`http://localhost:6632\`. */
  url: string;
  /** Sent as \`Authorization: Bearer <token>\` when the broker has auth on. */
  token?: string;
  /** Queue read. Default \`${name}.in\`. */
  source?: string;
  /** Queue that gets one message per closed window. Default \`${name}.out\`. */
  sink?: string;
  /** The query's name: its consumer group and its state rows. Default \`${name}\`. */
  queryId?: string;
  /** Window length, seconds. Default 60. */
  windowSeconds?: number;
  /** A window whose partition got no message for this long is closed anyway, ms. Default 5000. */
  idleFlushMs?: number;
  /** Messages per pop. Default 100. */
  batchSize?: number;
  /** Every failure; the runner keeps going (a failed batch is delivered again). */
  onError?: (error: Error) => void;
}

/**
 * The chain: the messages of \`source\` with a numeric \`value\`, per partition,
 * in tumbling processing-time windows; one message \`{count, sum}\` per closed
 * window on \`sink\`, exactly once (state, sink push and source ack commit in
 * one transaction). Replace the middle with your own operators.
 */
export async function runWorker(options: WorkerOptions): Promise<{ handle: RunHandle; queen: Queen }> {
  const { url, token } = options;
  const queen = new Queen({ url, bearerToken: token });
  const handle = await Stream.from(queen.queue(options.source ?? '${name}.in'))
    .filter((msg) => typeof msg.data?.value === 'number')
    .windowTumbling({ seconds: options.windowSeconds ?? 60, idleFlushMs: options.idleFlushMs ?? 5000 })
    .aggregate({ count: () => 1, sum: (m) => m.value })
    .to(queen.queue(options.sink ?? '${name}.out'))
    .run({ queryId: options.queryId ?? '${name}', url, bearerToken: token, batchSize: options.batchSize ?? 100, onError: options.onError });
  return { handle, queen };
}
`;
}

function main(name: string): string {
  return `#!/usr/bin/env node
// ${name} as a deployable: one process per replica, configured from the
// environment (README). Prints one line once it runs. On SIGTERM or SIGINT
// it stops popping, lets the cycle in flight commit, and exits 0; a second
// signal exits at once (what was not committed is delivered again).
import { runWorker } from './worker.js';

const env = process.env;
const number = (key: string) => (env[key] ? Number(env[key]) : undefined);
const url = env.QUEEN_URL || 'http://localhost:6632';

const { handle, queen } = await runWorker({
  url,
  token: env.QUEEN_TOKEN || undefined,
  source: env.SOURCE_QUEUE || undefined,
  sink: env.SINK_QUEUE || undefined,
  queryId: env.QUERY_ID || undefined,
  windowSeconds: number('WINDOW_SECONDS'),
  idleFlushMs: number('IDLE_FLUSH_MS'),
  onError: (e) => console.error(\`${name}: \${e.message}\`),
});
handle.on('cycle:commit', (c) => c.emits > 0 && console.log(\`${name}: \${c.emits} window(s) of partition \${c.partition} closed\`));
handle.on('window:flush', (f) => console.log(\`${name}: \${f.emits} idle window(s) of partition \${f.partition} closed\`));
handle.on('lease:lost', (l) => console.error(\`${name}: lease lost on partition \${l.partitionId} (\${l.code}); the batch is delivered again\`));

let stopping = false;
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    if (stopping) process.exit(1);
    stopping = true;
    handle
      .stop()
      .then(() => queen.close())
      .then(
        () => {
          const m = handle.metrics();
          console.log(\`${name} stopped after \${m.messagesTotal} message(s)\`);
          process.exit(0);
        },
        (err: Error) => {
          console.error(\`${name}: stop failed: \${err.message}\`);
          process.exit(1);
        },
      );
  });
}
// Last, once SIGTERM is handled: whoever waits for this line may stop it right away.
console.log(\`${name} running against \${url} (query \${handle.queryUuid})\`);
`;
}

function workerTest(name: string): string {
  return `import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, sleep, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { runWorker } from './worker.js';

// The worker against a real broker (a fresh database on the run's
// PostgreSQL): in this process, then src/main.ts as a child process that
// must exit 0 on SIGTERM.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

/** Every message on \`queue\` so far, read as a consumer group of its own. */
async function readAll(queue: string): Promise<any[]> {
  const group = uniqueName('check');
  const out: any[] = [];
  for (;;) {
    const res = await b.http('GET', \`/api/v1/pop/queue/\${queue}?batch=500&autoAck=true&consumerGroup=\${group}&subscriptionMode=all\`);
    if (res.status === 204) return out;
    expect(res.status).toBe(200);
    out.push(...res.body.messages);
  }
}

/** Waits until the windows on \`sink\` add up to \`count\` messages, then checks nothing more arrives. */
async function totalsOn(sink: string, count: number): Promise<{ count: number; sum: number }> {
  const add = (msgs: any[]) => msgs.reduce((t, m) => ({ count: t.count + m.data.count, sum: t.sum + m.data.sum }), { count: 0, sum: 0 });
  await eventually(async () => add(await readAll(sink)).count >= count, 20000, 200);
  await sleep(1500);
  return add(await readAll(sink));
}

async function push(queue: string, payloads: unknown[], partition = 'p1'): Promise<void> {
  const res = await b.http('POST', '/api/v1/push', { items: payloads.map((payload) => ({ queue, partition, payload })) });
  expect(res.status).toBe(201);
}

describe('${name}', () => {
  it('counts and sums each window onto the sink, exactly once, skipping messages without a numeric value', async () => {
    const source = uniqueName('${name}.in');
    const sink = \`\${source}.out\`;
    const errors: Error[] = [];
    const { handle, queen } = await runWorker({ url: b.url, source, sink, queryId: source, windowSeconds: 1, idleFlushMs: 300, onError: (e) => errors.push(e) });
    try {
      await push(source, [{ value: 1 }, { value: 2 }, { other: true }, { value: 3 }]);
      await push(source, [{ value: 10 }], 'p2');
      expect(await totalsOn(sink, 4)).toEqual({ count: 4, sum: 16 });
      expect(handle.metrics().messagesTotal).toBe(5);
      expect(errors).toEqual([]);
    } finally {
      await handle.stop();
      await queen.close();
    }
  });

  it('main runs from the environment, emits windows, and exits 0 on SIGTERM', async () => {
    const source = uniqueName('${name}.in');
    const sink = \`\${source}.out\`;
    const here = dirname(fileURLToPath(import.meta.url));
    const child = spawn(process.execPath, ['--import', 'tsx', join(here, 'main.ts')], {
      cwd: join(here, '..'),
      env: { ...process.env, QUEEN_URL: b.url, SOURCE_QUEUE: source, SINK_QUEUE: sink, QUERY_ID: source, WINDOW_SECONDS: '1', IDLE_FLUSH_MS: '300' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      await eventually(async () => out.includes('${name} running against'), 30000, 100).catch((e: Error) => {
        throw new Error(\`\${e.message}; stdout: \${out}; stderr: \${err}\`);
      });
      await push(source, [{ value: 4 }, { value: 5 }]);
      expect(await totalsOn(sink, 2)).toEqual({ count: 2, sum: 9 });
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited, \`stdout: \${out}; stderr: \${err}\`).toBe(0);
    expect(out).toContain('${name} stopped after 2 message(s)');
  });
});
`;
}

function readme(name: string): string {
  return `# ${name}

A stream worker: it reads \`${name}.in\`, keeps the messages with a numeric
\`value\`, and puts one message \`{count, sum}\` per one-minute window and
partition on \`${name}.out\`, exactly once. Change the chain in
[\`src/worker.ts\`](src/worker.ts); \`src/main.ts\` is the process you deploy.

\`\`\`sh
npm install                              # once: links this workspace, records it in package-lock.json
npx nx build ${name}                     # dist/, with the bin dist/main.js
npm test -w ${name}                      # its tests, against an embedded PostgreSQL (or DATABASE_URL)
npm start                                # at the repository root, in another terminal: a broker on :6632
QUEEN_URL=http://localhost:6632 node apps/${name}/dist/main.js
npx queen push ${name}.in '{"value":5}' --partition customer-42
npx queen tail ${name}.out --from all    # the window, when it closes (a minute, or 5 s without messages)
\`\`\`

## Settings

| Variable | Default | Meaning |
|---|---|---|
| \`QUEEN_URL\` | \`http://localhost:6632\` | the broker (or a load balancer in front of several) |
| \`QUEEN_TOKEN\` | none | bearer token, when the broker has \`QUEEN_AUTH_ENABLED=true\` (read-write level) |
| \`SOURCE_QUEUE\` | \`${name}.in\` | queue read |
| \`SINK_QUEUE\` | \`${name}.out\` | queue written |
| \`QUERY_ID\` | \`${name}\` | the query's name: its consumer group and state rows; every replica uses the same |
| \`WINDOW_SECONDS\` | 60 | window length |
| \`IDLE_FLUSH_MS\` | 5000 | a window of a partition that got no message for this long is closed anyway |

SIGTERM (or SIGINT) stops it cleanly: it stops popping, lets the cycle in
flight commit, prints \`${name} stopped after N message(s)\` and exits 0. A
second signal exits at once; what it had not committed is delivered again
and counted once, since the state, the sink push and the source ack commit
in one transaction.

## Replicas

Partitions are the parallelism. Every replica runs the same program with the
same \`QUERY_ID\`; a replica leases a partition for a batch, so one partition
is processed by one replica at a time, in order, and different partitions
go to different replicas. Producers choose the partition (\`partition\` in
the push: a customer, a tenant, a device); a queue with one partition keeps
one replica busy however many you start.

\`\`\`sh
for i in 1 2 3; do QUEEN_URL=http://localhost:6632 node apps/${name}/dist/main.js & done
\`\`\`

or three replicas of one container or systemd unit. Stopping or adding one
needs no coordination: its leases expire (the queue's \`leaseTime\`) or are
released on SIGTERM, and the others take its partitions.

## What to watch

- \`npx queen streams list\`: the query, its partitions, cursor and lag.
- \`npx queen groups list --queue ${name}.in\`: lag of the group
  \`streams.${name}\` in messages and seconds. A lag that keeps growing
  wants more replicas (if there are more busy partitions than replicas) or a
  bigger batch.
- The broker's \`GET /metrics\`: \`queen_streams_cycles_total\` by result, and
  the per-query and per-group gauges (see the repository's
  \`docs/operations.md\`).
- This process: lines on stderr (\`lease lost\`: a batch took longer than the
  lease; errors), and \`handle.metrics()\` in \`src/main.ts\` for counters of
  its own.
`;
}
