// Shared plumbing of the bench/*.mjs scripts (files starting with "_" are not
// benchmarks: bench/run.mjs skips them). Runs against the built dist/ packages.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { mkdtemp, mkdir, readFile, writeFile, rm } from 'node:fs/promises';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { freePort, startEmbeddedPostgres } from '@queen-mq/broker';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** Progress goes to stderr so stdout keeps only the result table. */
export function progress(name, text) {
  process.stderr.write(`[${name}] ${text}\n`);
}

/**
 * A database for one benchmark: a fresh database on DATABASE_URL's cluster
 * when it allows CREATE DATABASE (else DATABASE_URL itself), or an embedded
 * PostgreSQL in a temporary directory with default (durable) settings.
 */
export async function startDatabase(name) {
  const external = process.env.DATABASE_URL || process.env.QUEEN_DATABASE_URL;
  let embedded;
  let dir;
  let adminUrl = external;
  if (!external) {
    dir = await mkdtemp(join(tmpdir(), 'queen-bench-'));
    progress(name, `starting embedded PostgreSQL in ${dir}`);
    embedded = await startEmbeddedPostgres({ dataDir: join(dir, 'pg'), persistent: false });
    adminUrl = embedded.url;
  }
  const dbName = `bench_${randomBytes(4).toString('hex')}`;
  let url = adminUrl;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`create database ${dbName}`);
    const u = new URL(adminUrl);
    u.pathname = `/${dbName}`;
    url = u.toString();
  } catch (err) {
    progress(name, `cannot create a scratch database (${err.message}); using DATABASE_URL as is`);
  } finally {
    await admin.end();
  }
  const settings = {};
  const probe = new pg.Client({ connectionString: url });
  await probe.connect();
  for (const s of ['server_version', 'fsync', 'synchronous_commit', 'shared_buffers', 'max_connections']) {
    settings[s] = (await probe.query(`show ${s}`)).rows[0][s];
  }
  await probe.end();
  return {
    url,
    embedded: !!embedded,
    settings,
    async stop() {
      if (url !== adminUrl) {
        const c = new pg.Client({ connectionString: adminUrl });
        await c.connect();
        await c.query(`drop database if exists ${dbName} with (force)`).catch(() => undefined);
        await c.end();
      }
      await embedded?.stop();
      if (dir) await rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The deployable broker (apps/broker/dist/main.js) as a child process, so its
 * RSS is the broker's alone. Resolves once /ready answers 200. `script`: another
 * server that takes DATABASE_URL and QUEEN_PORT and answers /ready (_http-floor.mjs).
 */
export async function spawnBroker(name, databaseUrl, env = {}, nodeArgs = [], script = join(ROOT, 'apps/broker/dist/main.js')) {
  const port = await freePort();
  const child = spawn(process.execPath, [...nodeArgs, script], {
    env: { ...process.env, DATABASE_URL: databaseUrl, QUEEN_PORT: String(port), QUEEN_HOST: '127.0.0.1', QUEEN_LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const tail = [];
  const keep = (chunk) => {
    tail.push(...chunk.toString().split('\n').filter(Boolean));
    tail.splice(0, Math.max(0, tail.length - 20));
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  let exited = null;
  child.once('exit', (code, signal) => (exited = { code, signal }));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60000;
  for (;;) {
    if (exited) throw new Error(`broker exited (${JSON.stringify(exited)}):\n${tail.join('\n')}`);
    try {
      const res = await fetch(`${url}/ready`);
      if (res.status === 200) break;
    } catch {
      /* not listening yet */
    }
    if (Date.now() > deadline) throw new Error(`broker not ready within 60 s:\n${tail.join('\n')}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  progress(name, `broker pid ${child.pid} ready on ${url}`);
  return {
    url,
    pid: child.pid,
    async stop() {
      if (exited) return;
      const done = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10000);
      await done;
      clearTimeout(timer);
    },
  };
}

/** The fields of /proc/<pid>/stat after the command name (null once the process is gone). */
function procStat(pid) {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  } catch {
    return null;
  }
}

/**
 * Seconds of CPU a process used (user + system); with `children`, also what
 * its exited children used (PostgreSQL's ended backends). 0 without /proc.
 */
export function cpuSecondsOf(pid, { children = false } = {}) {
  const f = procStat(pid);
  if (!f) return 0;
  const USER_HZ = 100;
  return (Number(f[11]) + Number(f[12]) + (children ? Number(f[13]) + Number(f[14]) : 0)) / USER_HZ;
}

/** The parent of a process (a backend's is the postmaster); -1 once it is gone. */
export const parentPidOf = (pid) => Number(procStat(pid)?.[1] ?? -1);

/** Seconds of CPU of a PostgreSQL cluster: its postmaster, the backends that ended, and every live one. */
export function postgresCpuSeconds(postmasterPid) {
  let s = cpuSecondsOf(postmasterPid, { children: true });
  for (const d of readdirSync('/proc')) if (/^\d+$/.test(d) && parentPidOf(d) === postmasterPid) s += cpuSecondsOf(d);
  return s;
}

/** VmRSS of a process in bytes, from /proc (null where /proc is absent). */
export async function rssOf(pid) {
  try {
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
    return m ? Number(m[1]) * 1024 : null;
  } catch {
    return null;
  }
}

/**
 * Samples a process's RSS every `everyMs`; `mark(label)` starts a new phase so
 * each phase reports its own peak.
 */
export function rssSampler(pid, everyMs = 200) {
  const phases = [];
  let current = { label: 'start', peak: 0, samples: 0 };
  phases.push(current);
  let overall = 0;
  let last = null;
  const sample = async () => {
    const v = await rssOf(pid);
    if (v === null) return;
    last = v;
    current.peak = Math.max(current.peak, v);
    current.samples++;
    overall = Math.max(overall, v);
  };
  const timer = setInterval(() => void sample(), everyMs);
  return {
    sample,
    async mark(label) {
      await sample();
      current = { label, peak: last ?? 0, samples: 0 };
      phases.push(current);
    },
    async stop() {
      clearInterval(timer);
      await sample();
      return { peakBytes: overall, lastBytes: last, phases: phases.map((p) => ({ phase: p.label, peakBytes: p.peak, samples: p.samples })) };
    },
  };
}

export function percentile(sorted, p) {
  if (!sorted.length) return null;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/**
 * Runs `workers` copies of `step()` (each call moves some messages and answers
 * how many) for `seconds` after `warmupSeconds` not counted, or until
 * `maxMessages`. Answers messages, elapsed seconds, msg/s and step latencies.
 */
export async function measure({ workers, seconds, warmupSeconds = 0.5, maxMessages = Infinity, step, keepLatencies = false }) {
  const warmEnd = Date.now() + warmupSeconds * 1000;
  await Promise.all(Array.from({ length: workers }, async (_, w) => {
    while (Date.now() < warmEnd) await step(w);
  }));
  let messages = 0;
  const latencies = [];
  const started = performance.now();
  const end = started + seconds * 1000;
  await Promise.all(Array.from({ length: workers }, async (_, w) => {
    while (performance.now() < end && messages < maxMessages) {
      const t0 = performance.now();
      // Not `messages += await step(w)`: that reads `messages` before the
      // await, so concurrent workers would overwrite each other's counts.
      const moved = await step(w);
      messages += moved;
      latencies.push(performance.now() - t0);
    }
  }));
  const elapsed = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const round = (v) => (v === null ? null : Math.round(v * 100) / 100);
  const mean = latencies.length ? latencies.reduce((a, b) => a + b, 0) / latencies.length : null;
  return {
    messages, steps: latencies.length, seconds: round(elapsed), msgPerSec: Math.round(messages / elapsed),
    p50Ms: round(percentile(latencies, 50)), p99Ms: round(percentile(latencies, 99)), meanMs: round(mean), maxMs: round(latencies.at(-1) ?? null),
    ...(keepLatencies ? { latencies } : {}),
  };
}

/**
 * Runs several paths over the same work in alternating rounds (A B C A B C
 * ...) and sums each path's rounds: on a shared machine the load drifts over
 * minutes, and paths measured back to back see the same drift. `paths` maps
 * a name to a step as in measure(). Answers one aggregate per path, with the
 * per-round rates kept for inspection.
 */
export async function interleaved({ rounds, seconds, workers, maxMessages, paths, onRound }) {
  const acc = Object.fromEntries(Object.keys(paths).map((name) => [name, { messages: 0, seconds: 0, latencies: [], rounds: [], error: null }]));
  for (let r = 0; r < rounds; r++) {
    for (const [name, step] of Object.entries(paths)) {
      const a = acc[name];
      if (a.error) continue;
      try {
        const m = await measure({ workers, seconds, maxMessages, step, keepLatencies: true });
        a.messages += m.messages;
        a.seconds += m.seconds;
        a.rounds.push(m.msgPerSec);
        for (const l of m.latencies) a.latencies.push(l);
        onRound?.(name, r, m);
      } catch (err) {
        a.error = err.message;
      }
    }
  }
  const round = (v) => (v === null ? null : Math.round(v * 100) / 100);
  return Object.fromEntries(Object.entries(acc).map(([name, a]) => {
    if (a.error) return [name, { error: a.error }];
    a.latencies.sort((x, y) => x - y);
    return [name, {
      messages: a.messages, seconds: round(a.seconds), msgPerSec: Math.round(a.messages / a.seconds), roundsMsgPerSec: a.rounds,
      p50Ms: round(percentile(a.latencies, 50)), p99Ms: round(percentile(a.latencies, 99)), maxMs: round(a.latencies.at(-1) ?? null),
    }];
  }));
}

/** Aligned text table. */
export function table(columns, rows) {
  const cells = rows.map((r) => columns.map((c) => (r[c] === undefined || r[c] === null ? '' : String(r[c]))));
  const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((row) => row[i].length)));
  const line = (vals) => vals.map((v, i) => (i === 0 ? v.padEnd(widths[i]) : v.padStart(widths[i]))).join('  ');
  return [line(columns), line(widths.map((w) => '-'.repeat(w))), ...cells.map(line)].join('\n');
}

export function machine() {
  const list = cpus();
  // loadavg: other work on the machine while the numbers were taken.
  return { cpus: list.length, cpuModel: list[0]?.model ?? 'unknown', totalMemBytes: totalmem(), loadavg1m: loadNow(), node: process.version, platform: process.platform };
}

/** The one-minute load average, rounded: other work on the machine. */
export const loadNow = () => Math.round(loadavg()[0] * 100) / 100;

/** Bytes as MB with one decimal (null stays null). */
export const mb = (bytes) => (bytes == null ? null : Math.round((bytes / 1048576) * 10) / 10);

/** The fields every result file opens with: what ran, when, where, on which PostgreSQL. */
export function resultsHead(name, db, loadAtStart) {
  return {
    benchmark: name,
    when: new Date().toISOString(),
    machine: { ...machine(), loadavg1mAtStart: loadAtStart },
    postgres: { embedded: db.embedded, ...db.settings },
  };
}

/** Writes bench/results/<name>.json. */
export async function writeResults(name, data) {
  const file = join(ROOT, 'bench', 'results', `${name}.json`);
  await mkdir(dirname(file), { recursive: true });
  await writeFile(file, `${JSON.stringify(data, null, 2)}\n`);
  return file;
}
