import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { get as httpGet } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '@queen-mq/broker';
import { freshDatabase, sleep } from '@queen-mq/testing';

// SIGTERM on the deployable broker (the built dist/main.js, as operators run
// it): stop accepting, answer parked pops 204, finish what is in flight,
// close the pool, stop an embedded PostgreSQL last, exit 0; past
// QUEEN_SHUTDOWN_TIMEOUT_MS exit anyway. Run `npm run build` first.

const main = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'main.js');
const children = new Set<ChildProcess>();
const dirs: string[] = [];

afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

interface Spawned {
  child: ChildProcess;
  url: string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number }>;
  logs(): { msg: string; level: number }[];
  signalledAt: number;
}

async function spawnBroker(env: Record<string, string>, cwd: string): Promise<Spawned> {
  const port = await freePort();
  const child = spawn(process.execPath, [main], {
    cwd,
    env: { ...process.env, DATABASE_URL: '', QUEEN_DATABASE_URL: '', QUEEN_PORT: String(port), QUEEN_HOST: '127.0.0.1', QUEEN_LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (err += d));
  const spawned: Spawned = {
    child,
    url: `http://127.0.0.1:${port}`,
    signalledAt: 0,
    exited: new Promise((resolve) =>
      child.on('exit', (code, signal) => {
        children.delete(child);
        resolve({ code, signal, ms: Date.now() - spawned.signalledAt });
      }),
    ),
    logs: () =>
      out
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l)),
  };
  const deadline = Date.now() + 60000;
  while (!/Queen broker listening/.test(out)) {
    if (child.exitCode !== null) throw new Error(`broker exited with ${child.exitCode}: ${out}${err}`);
    if (Date.now() > deadline) throw new Error(`broker not listening after 60 s: ${out}${err}`);
    await sleep(50);
  }
  return spawned;
}

function terminate(s: Spawned): void {
  s.signalledAt = Date.now();
  s.child.kill('SIGTERM');
}

/** A long-poll pop, once the broker's gauge says it is parked (wrapped: an async function would adopt the promise). */
async function parkedPop(s: Spawned, queue: string): Promise<{ answer: Promise<{ status: number; at: number }> }> {
  // Its own connection (fetch could queue the metrics reads behind it on one socket).
  const answer = new Promise<{ status: number; at: number }>((resolve, reject) => {
    const req = httpGet(`${s.url}/api/v1/pop/queue/${queue}?wait=true&timeout=30000`, { agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode!, at: Date.now() - s.signalledAt }));
    });
    req.on('error', reject);
  });
  for (let i = 0; i < 100; i++) {
    const metrics = await (await fetch(`${s.url}/metrics`)).text();
    if (/^queen_long_poll_waiting 1$/m.test(metrics)) return { answer };
    await sleep(50);
  }
  throw new Error('the pop never parked');
}

async function tempDir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'queen-shutdown-'));
  await chmod(d, 0o755);
  dirs.push(d);
  return d;
}

describe('apps/broker graceful shutdown', () => {
  it('SIGTERM with DATABASE_URL set: a parked pop is answered 204 at once, exit code 0', async () => {
    const s = await spawnBroker({ DATABASE_URL: await freshDatabase() }, await tempDir());
    const pop = await parkedPop(s, 'parked');
    terminate(s);
    const answered = await pop.answer;
    expect(answered.at).toBeLessThan(2000);
    expect(answered.status).toBe(204);
    const exit = await s.exited;
    expect({ code: exit.code, signal: exit.signal }).toEqual({ code: 0, signal: null });
    expect(exit.ms).toBeLessThan(5000);
    const msgs = s.logs().map((l) => l.msg);
    expect(msgs).toContain('stopped');
  });

  it('SIGTERM with the embedded PostgreSQL: parked pop 204, then PostgreSQL stopped last (no postmaster.pid left), exit code 0', async () => {
    const cwd = await tempDir();
    const s = await spawnBroker({ QUEEN_EMBEDDED_PG_PORT: String(await freePort()) }, cwd);
    const push = await fetch(`${s.url}/api/v1/push`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ items: [{ queue: 'before', payload: { n: 1 } }] }),
    });
    expect(push.status).toBe(201);
    const pop = await parkedPop(s, 'parked');
    terminate(s);
    const answered = await pop.answer;
    expect(answered.status).toBe(204);
    expect(answered.at).toBeLessThan(2000);
    const exit = await s.exited;
    expect({ code: exit.code, signal: exit.signal }).toEqual({ code: 0, signal: null });
    expect(existsSync(join(cwd, '.queen', 'pg', 'postmaster.pid'))).toBe(false);
  });

  it('a request that never finishes does not hold shutdown past QUEEN_SHUTDOWN_TIMEOUT_MS: exit code 1 at the deadline', async () => {
    const s = await spawnBroker({ DATABASE_URL: await freshDatabase(), QUEEN_SHUTDOWN_TIMEOUT_MS: '700' }, await tempDir());
    // Headers sent, body promised but never sent: the request stays in flight.
    const port = Number(new URL(s.url).port);
    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    await new Promise((r) => socket.once('connect', r));
    socket.write('POST /api/v1/push HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"items":');
    await sleep(200);
    terminate(s);
    const exit = await s.exited;
    socket.destroy();
    expect({ code: exit.code, signal: exit.signal }).toEqual({ code: 1, signal: null });
    expect(exit.ms).toBeGreaterThanOrEqual(650);
    expect(exit.ms).toBeLessThan(5000);
    expect(s.logs().map((l) => l.msg)).toContain('shutdown deadline passed: exiting with work unfinished');
  });
});
