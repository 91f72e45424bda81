import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { appendFileSync, chownSync, closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { sleep } from './harness.js';

// A pg_auto_failover formation of its own (a monitor, a primary and a
// synchronous standby on loopback ports, trust auth, in a temp dir) for the
// failover drill and the failover benchmark: Debian's postgresql-15 and
// postgresql-15-auto-failover.

const PG_BIN = '/usr/lib/postgresql/15/bin';
const AUTOCTL = '/usr/bin/pg_autoctl';

/** Why a formation cannot run here (what to install), or undefined. */
export function pgAutoFailoverMissing(): string | undefined {
  if (process.platform !== 'linux') return 'pg_auto_failover runs on Linux only';
  if (!existsSync(AUTOCTL) || !existsSync(join(PG_BIN, 'pg_ctl'))) {
    return 'pg_autoctl or PostgreSQL 15 not installed (Debian packages postgresql-15 and postgresql-15-auto-failover; .ci/run installs them)';
  }
  if (process.getuid?.() === 0 && spawnSync('id', ['-u', 'postgres']).status !== 0) return 'running as root and there is no postgres OS user to run PostgreSQL as';
  return undefined;
}

/** kill -9 of a process and everything under it. */
export function killTree(root: number): void {
  const ps = spawnSync('ps', ['-e', '-o', 'pid=,ppid='], { encoding: 'utf8' }).stdout;
  const children = new Map<number, number[]>();
  for (const line of ps.split('\n')) {
    const [pid, ppid] = line.trim().split(/\s+/).map(Number);
    if (!pid || ppid === undefined) continue;
    children.set(ppid, [...(children.get(ppid) ?? []), pid]);
  }
  const all: number[] = [];
  const walk = (p: number) => {
    all.push(p);
    for (const c of children.get(p) ?? []) walk(c);
  };
  walk(root);
  for (const p of all) {
    try {
      process.kill(p, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
}

export type NodeName = 'n1' | 'n2';

/** A pg_auto_failover formation of its own: monitor + two nodes, trust auth on 127.0.0.1, in a temp dir. */
export class PgAutoFailover {
  readonly dir: string;
  private readonly ids: { uid?: number; gid?: number } = {};
  private readonly env: NodeJS.ProcessEnv;
  readonly ports: { monitor: number; n1: number; n2: number };
  private readonly runs = new Map<string, ChildProcess>();

  constructor(ports: { monitor: number; n1: number; n2: number }) {
    this.ports = ports;
    // PostgreSQL refuses to run as root: as root (CI), everything runs as the
    // postgres OS user, so the directory lives where it can reach (not /root).
    const root = process.getuid?.() === 0;
    this.dir = mkdtempSync(join(root ? '/tmp' : tmpdir(), 'queen-failover-'));
    if (root) {
      this.ids.uid = Number(spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).stdout.trim());
      this.ids.gid = Number(spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).stdout.trim());
      chownSync(this.dir, this.ids.uid, this.ids.gid);
    }
    // pg_autoctl keeps its config, state and pid files under the XDG directories.
    this.env = {
      PATH: `${PG_BIN}:/usr/bin:/bin`,
      HOME: this.dir,
      XDG_CONFIG_HOME: join(this.dir, 'config'),
      XDG_DATA_HOME: join(this.dir, 'data'),
      XDG_RUNTIME_DIR: join(this.dir, 'run'),
      PG_CONFIG: join(PG_BIN, 'pg_config'),
      LANG: 'C.UTF-8',
    };
  }

  get monitorUrl(): string {
    return `postgres://autoctl_node@127.0.0.1:${this.ports.monitor}/pg_auto_failover?sslmode=disable`;
  }

  /** libpq's multi-host URL the broker is given. */
  get brokerUrl(): string {
    return `postgresql://postgres@127.0.0.1:${this.ports.n1},127.0.0.1:${this.ports.n2}/queen?target_session_attrs=read-write&connect_timeout=2`;
  }

  nodeUrl(n: NodeName): string {
    return `postgresql://postgres@127.0.0.1:${this.ports[n]}/queen`;
  }

  private autoctl(args: string[]): Promise<string> {
    return new Promise((resolve, reject) => {
      const child = spawn(AUTOCTL, args, { env: this.env, cwd: this.dir, ...this.ids, stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      child.stdout.on('data', (d) => (out += d));
      child.stderr.on('data', (d) => (out += d));
      child.on('error', reject);
      child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`pg_autoctl ${args.join(' ')} exited ${code}:\n${out.slice(-3000)}`))));
    });
  }

  /** `pg_autoctl run` of one member (monitor, n1, n2), its output in <dir>/<name>.log. */
  start(name: 'monitor' | NodeName): void {
    const log = openSync(join(this.dir, `${name}.log`), 'a');
    const child = spawn(AUTOCTL, ['run', '--pgdata', join(this.dir, name)], { env: this.env, cwd: this.dir, ...this.ids, stdio: ['ignore', log, log], detached: true });
    closeSync(log);
    child.on('error', () => undefined);
    this.runs.set(name, child);
  }

  /** A node crash: kill -9 of its `pg_autoctl run` and everything under it (the postmaster and its backends). */
  crash(name: NodeName): void {
    const child = this.runs.get(name);
    if (child?.pid) killTree(child.pid);
    this.runs.delete(name);
  }

  private conf(name: string, lines: string[]): void {
    // Appended last, so these win over pg_autoctl's own include (it sizes shared_buffers to 25 % of RAM).
    appendFileSync(join(this.dir, name, 'postgresql.conf'), `\n${lines.join('\n')}\n`);
  }

  async create(): Promise<void> {
    const common = ['--auth', 'trust', '--no-ssl', '--hostname', '127.0.0.1'];
    await this.autoctl(['create', 'monitor', '--pgdata', join(this.dir, 'monitor'), '--pgport', String(this.ports.monitor), ...common]);
    // Failure detection in about 5 s instead of about 20.
    this.conf('monitor', [
      "listen_addresses = '127.0.0.1'",
      'shared_buffers = 32MB',
      'pgautofailover.health_check_period = 1000',
      'pgautofailover.health_check_timeout = 1000',
      'pgautofailover.health_check_max_retries = 1',
      'pgautofailover.health_check_retry_delay = 500',
      'pgautofailover.node_considered_unhealthy_timeout = 5000',
      // After detection the new primary holds writes until the old one has
      // demoted itself or this timeout passed (30 s by default: the guard
      // against two primaries when the old one is only cut off). Here the old
      // node is dead, so the wait is only lost time.
      'pgautofailover.primary_demote_timeout = 1000',
    ]);
    this.start('monitor');
    await this.until(async () => (await this.monitorQuery('select 1')) !== undefined, 30000, 'monitor up');
    for (const n of ['n1', 'n2'] as const) {
      await this.autoctl([
        'create', 'postgres', '--pgdata', join(this.dir, n), '--pgport', String(this.ports[n]), '--listen', '127.0.0.1',
        '--name', n, '--dbname', 'queen', '--monitor', this.monitorUrl, ...common,
      ]);
      // fsync off: a crash here is a killed process, never a lost kernel page
      // cache, so durability is unchanged and a loaded CI machine keeps pace.
      if (n === 'n1') this.conf(n, ['shared_buffers = 64MB', 'fsync = off']);
      this.start(n);
      await this.healthy(n === 'n1' ? 1 : 2, 90000);
    }
  }

  private async monitorQuery<R extends pg.QueryResultRow>(sql: string): Promise<R[] | undefined> {
    const c = new pg.Client({ connectionString: `postgres://postgres@127.0.0.1:${this.ports.monitor}/pg_auto_failover`, connectionTimeoutMillis: 2000 });
    c.on('error', () => undefined);
    try {
      await c.connect();
      return (await c.query<R>(sql)).rows;
    } catch {
      return undefined;
    } finally {
      await c.end().catch(() => undefined);
    }
  }

  /** The nodes as the monitor sees them. */
  async states(): Promise<{ nodename: string; reportedstate: string; goalstate: string }[]> {
    return (await this.monitorQuery<{ nodename: string; reportedstate: string; goalstate: string }>('select nodename, reportedstate::text, goalstate::text from pgautofailover.node order by nodeid')) ?? [];
  }

  /** The node the monitor has as primary, both settled (one primary, one secondary when two). */
  async healthy(count: 1 | 2 = 2, ms = 120000): Promise<NodeName> {
    let primary: NodeName | undefined;
    await this.until(
      async () => {
        const s = await this.states();
        const settled = s.length === count && s.every((n) => n.reportedstate === n.goalstate);
        const p = s.find((n) => n.reportedstate === (count === 1 ? 'single' : 'primary'));
        primary = p?.nodename as NodeName | undefined;
        return settled && !!p && (count === 1 || s.some((n) => n.reportedstate === 'secondary'));
      },
      ms,
      `formation healthy (${count} nodes)`,
    );
    return primary!;
  }

  /**
   * When `n` first commits a read-write transaction: one session at a time
   * takes a transaction id where the session is not read-only, and commits
   * it. pg_auto_failover promotes a standby with
   * `default_transaction_read_only = on` and lifts it seconds later, once the
   * old primary is known demoted (or its demote timeout passed), so neither
   * `pg_is_in_recovery()` nor a bare `txid_current()` tells when clients may
   * write; the monitor's state is reported up to a second or two late.
   */
  async promotedAt(n: NodeName, ms = 90000): Promise<number> {
    const deadline = Date.now() + ms;
    for (;;) {
      const c = new pg.Client({ connectionString: this.nodeUrl(n), connectionTimeoutMillis: 1000, query_timeout: ms });
      c.on('error', () => undefined);
      try {
        await c.connect();
        const { rows } = await c.query(`select txid_current() as x where current_setting('transaction_read_only') = 'off'`);
        if (rows.length === 1) return Date.now();
      } catch {
        /* still a standby, down or restarting */
      } finally {
        await c.end().catch(() => undefined);
      }
      if (Date.now() > deadline) throw new Error(`${n} took no write within ${ms} ms; states ${JSON.stringify(await this.states())}\n${this.logs()}`);
      await sleep(50);
    }
  }

  switchover(): Promise<string> {
    return this.autoctl(['perform', 'switchover', '--pgdata', join(this.dir, 'monitor'), '--wait', '60']);
  }

  private async until(fn: () => Promise<boolean>, ms: number, what: string, every = 250): Promise<void> {
    const deadline = Date.now() + ms;
    while (!(await fn())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; states ${JSON.stringify(await this.states())}\n${this.logs()}`);
      await sleep(every);
    }
  }

  logs(): string {
    return ['monitor', 'n1', 'n2'].map((n) => `--- ${n}.log\n${existsSync(join(this.dir, `${n}.log`)) ? readFileSync(join(this.dir, `${n}.log`), 'utf8').slice(-1500) : ''}`).join('\n');
  }

  destroy(): void {
    for (const name of ['n1', 'n2', 'monitor']) {
      const child = this.runs.get(name);
      if (child?.pid) killTree(child.pid);
    }
    this.runs.clear();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

