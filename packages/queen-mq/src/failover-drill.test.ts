import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { appendFileSync, chownSync, existsSync, mkdtempSync, openSync, closeSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '@queen-mq/broker';
import { sleep, uniqueName } from '@queen-mq/testing';
import { Queen, Stream } from './index.js';

// A PostgreSQL failover drill on a real pg_auto_failover formation (a monitor,
// a primary and a synchronous standby on loopback ports, Debian's
// postgresql-15 and postgresql-15-auto-failover): the deployable broker (its
// own process) on a multi-host DATABASE_URL, under push, pop/ack,
// transaction and stream load, while the primary node crashes twice (kill -9
// of its `pg_autoctl run` and every process under it, the postmaster
// included), a switchover runs and the standby crashes. Nothing acknowledged
// may be lost or stored twice, the broker keeps its pid and serves pushes
// again soon after each promotion.

const PG_BIN = '/usr/lib/postgresql/15/bin';
const AUTOCTL = '/usr/bin/pg_autoctl';
const MAIN = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'apps', 'broker', 'dist', 'main.js');

/** Why the drill cannot run here, or undefined. */
function skipReason(): string | undefined {
  if (process.platform !== 'linux') return 'pg_auto_failover runs on Linux only';
  if (!existsSync(AUTOCTL) || !existsSync(join(PG_BIN, 'pg_ctl'))) {
    return 'pg_autoctl or PostgreSQL 15 not installed (Debian packages postgresql-15 and postgresql-15-auto-failover; .ci/run installs them)';
  }
  if (process.getuid?.() === 0 && spawnSync('id', ['-u', 'postgres']).status !== 0) return 'running as root and there is no postgres OS user to run PostgreSQL as';
  if (!existsSync(MAIN)) return `the broker is not built (${MAIN}); npm test builds it`;
  return undefined;
}
const skip = skipReason();
if (skip) console.log(`failover drill skipped: ${skip}`);

/** kill -9 of a process and everything under it. */
function killTree(root: number): void {
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

type NodeName = 'n1' | 'n2';

/** A pg_auto_failover formation of its own: monitor + two nodes, trust auth on 127.0.0.1, in a temp dir. */
class Formation {
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

  /** When `n` answers as a writable server (polled every 50 ms). */
  async writableAt(n: NodeName, ms = 60000): Promise<number> {
    await this.until(async () => {
      const c = new pg.Client({ connectionString: this.nodeUrl(n), connectionTimeoutMillis: 500 });
      c.on('error', () => undefined);
      try {
        await c.connect();
        return !(await c.query<{ r: boolean }>('select pg_is_in_recovery() as r')).rows[0]!.r;
      } catch {
        return false;
      } finally {
        await c.end().catch(() => undefined);
      }
    }, ms, `${n} writable`, 50);
    return Date.now();
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

interface Broker {
  child: ChildProcess;
  url: string;
  lines: string[];
  exited?: { code: number | null; signal: string | null };
}

async function spawnBroker(databaseUrl: string): Promise<Broker> {
  const port = await freePort();
  const child = spawn(process.execPath, [MAIN], {
    env: { ...process.env, DATABASE_URL: databaseUrl, QUEEN_PORT: String(port), QUEEN_HOST: '127.0.0.1', QUEEN_LOG_LEVEL: 'info', QUEEN_RETENTION_INTERVAL_MS: '2000' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const b: Broker = { child, url: `http://127.0.0.1:${port}`, lines: [] };
  let rest = '';
  const take = (d: Buffer) => {
    rest += d.toString();
    const parts = rest.split('\n');
    rest = parts.pop()!;
    b.lines.push(...parts);
  };
  child.stdout!.on('data', take);
  child.stderr!.on('data', take);
  child.on('exit', (code, signal) => (b.exited = { code, signal }));
  const deadline = Date.now() + 60000;
  while (!b.lines.some((l) => l.includes('Queen broker listening'))) {
    if (b.exited || Date.now() > deadline) throw new Error(`broker did not start:\n${b.lines.join('\n')}`);
    await sleep(100);
  }
  return b;
}

async function call(base: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  try {
    const res = await fetch(base + path, { method, headers: body === undefined ? {} : { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      /* plain text */
    }
    return { status: res.status, body: parsed };
  } catch (err) {
    return { status: 0, body: { code: (err as Error).message } };
  }
}

/** One event of the drill and what the load saw around it. */
interface Event {
  name: string;
  at: number;
  /** When the new primary first answered writable (a failover), else undefined. */
  promotedAt?: number;
  settledAt?: number;
}

let formation: Formation | undefined;
let broker: Broker | undefined;

afterAll(async () => {
  if (broker && !broker.exited) broker.child.kill('SIGKILL');
  formation?.destroy();
});

describe.skipIf(!!skip)('PostgreSQL failover drill (pg_auto_failover: monitor, primary, synchronous standby)', () => {
  it('two primary crashes, a switchover and a standby crash under push, pop/ack, transaction and stream load: nothing acknowledged lost or stored twice, same broker pid, pushes back within 5 s of each promotion', async () => {
    const ports = { monitor: await freePort(), n1: await freePort(), n2: await freePort() };
    const f = (formation = new Formation(ports));
    const began = Date.now();
    await f.create();
    const formationMs = Date.now() - began;
    const b = (broker = await spawnBroker(f.brokerUrl));
    const pid = b.child.pid;

    const Q = uniqueName('drill');
    const SINK = uniqueName('drill-sink');
    for (const queue of [Q, SINK]) {
      // A batch whose ack or cycle was lost comes back soon.
      expect((await call(b.url, 'POST', '/api/v1/configure', { queue, options: { leaseTime: 3, retryLimit: 1000 } })).status).toBe(200);
    }

    let running = true;
    const acked = new Set<string>(); // transactionIds answered 201 / success
    const pushOks: number[] = []; // answer times of successful pushes
    const answers = new Map<string, number>(); // "<kind> <status> <code>" → count
    const note = (kind: string, a: { status: number; body: any }) => {
      const key = `${kind} ${a.status}${a.status >= 300 ? ` ${a.body?.code ?? ''}` : ''}`;
      answers.set(key, (answers.get(key) ?? 0) + 1);
    };
    let seq = 0;
    const pushers = [0, 1].map(async (w) => {
      while (running) {
        const id = `push-${w}-${seq++}`;
        // The same transactionId until it is answered: a resend after an ambiguous 503 is deduplicated.
        for (;;) {
          const a = await call(b.url, 'POST', '/api/v1/push', { items: [{ queue: Q, partition: `p${seq % 4}`, transactionId: id, payload: { id } }] });
          note('push', a);
          if (a.status === 201) {
            acked.add(id);
            pushOks.push(Date.now());
            break;
          }
          await sleep(50);
        }
        await sleep(5);
      }
    });
    const transactions = (async () => {
      while (running) {
        const id = `txn-${seq++}`;
        for (;;) {
          const a = await call(b.url, 'POST', '/api/v1/transaction', { operations: [{ type: 'push', items: [{ queue: Q, partition: 'txn', transactionId: id, payload: { id } }] }] });
          note('transaction', a);
          if (a.status === 200 && a.body?.success) {
            acked.add(id);
            break;
          }
          await sleep(50);
        }
        await sleep(20);
      }
    })();

    // Ready: polled through the drill; it must say not ready while no writable host answers.
    const readiness: { at: number; ready: boolean }[] = [];
    const readyLoop = (async () => {
      while (running) {
        const a = await call(b.url, 'GET', '/ready');
        readiness.push({ at: Date.now(), ready: a.status === 200 });
        await sleep(200);
      }
    })();

    const queen = new Queen({ url: b.url });
    const delivered = new Map<string, number>();
    const consumerErrors: string[] = [];
    const consumer = queen.queue(Q).consume(
      (m) => {
        const id = (m.data as { id: string }).id;
        delivered.set(id, (delivered.get(id) ?? 0) + 1);
      },
      { consumerGroup: 'drill-consumer', wait: 500, batch: 20, onError: (e) => consumerErrors.push(String((e as Error).message)) },
    );
    const streamErrors: string[] = [];
    const stream = await Stream.from(queen.queue(Q))
      .windowTumbling({ seconds: 1, idleFlushMs: 500 })
      .aggregate({ count: () => 1 })
      .map((agg: any, ctx: any) => ({ count: agg.count, window: ctx.windowKey }))
      .to(queen.queue(SINK))
      .run({ queryId: uniqueName('drill-count'), url: b.url, batchSize: 50, maxPartitions: 5, maxWaitMillis: 300, onError: (e, i) => streamErrors.push(`${i.phase}: ${e.message}`) });

    const events: Event[] = [];
    const gapAround = (e: Event) => {
      const from = e.at - 2000;
      const to = (e.settledAt ?? Date.now()) + 1000;
      const times = [e.at - 2000, ...pushOks.filter((t) => t >= from && t <= to)].sort((x, y) => x - y);
      let gap = 0;
      for (let i = 1; i < times.length; i++) gap = Math.max(gap, times[i]! - times[i - 1]!);
      return gap;
    };
    const other = (n: NodeName): NodeName => (n === 'n1' ? 'n2' : 'n1');

    try {
      // The load really runs (on a busy machine its first pushes take a while).
      const warm = Date.now() + 60000;
      while (acked.size < 30 && Date.now() < warm) await sleep(100);
      expect(acked.size).toBeGreaterThanOrEqual(30);

      for (const round of [1, 2]) {
        const primary = await f.healthy();
        const e: Event = { name: `primary crash ${round} (${primary})`, at: Date.now() };
        events.push(e);
        f.crash(primary);
        e.promotedAt = await f.writableAt(other(primary));
        // Pushes answered again soon after the promotion.
        while (!pushOks.some((t) => t >= e.promotedAt!) && Date.now() - e.promotedAt < 30000) await sleep(20);
        f.start(primary); // rejoins as the standby
        await f.healthy();
        e.settledAt = Date.now();
      }

      {
        const primary = await f.healthy();
        const e: Event = { name: `switchover (${primary} → ${other(primary)})`, at: Date.now() };
        events.push(e);
        await f.switchover();
        e.promotedAt = await f.writableAt(other(primary));
        await f.healthy();
        e.settledAt = Date.now();
      }

      {
        const primary = await f.healthy();
        const standby = other(primary);
        const e: Event = { name: `standby crash (${standby})`, at: Date.now() };
        events.push(e);
        f.crash(standby);
        // Commits wait while the synchronous standby is gone, until the monitor drops it from the quorum.
        await sleep(8000);
        f.start(standby);
        await f.healthy();
        e.settledAt = Date.now();
      }
      await sleep(1000);
    } finally {
      running = false;
      await Promise.all([...pushers, transactions, readyLoop]);
    }

    try {
      const primary = await f.healthy();
      const sql = new pg.Client({ connectionString: f.nodeUrl(primary) });
      await sql.connect();
      try {
        const stored = (
          await sql.query<{ id: string; copies: number; partition: string; msg_offset: string }>(
            `select m.payload->>'id' as id, count(*) over (partition by m.payload->>'id')::int as copies, p.name as partition, m.msg_offset::text
               from queen.messages m join queen.partitions p on p.id = m.partition_id
              where p.queue_name = $1 order by p.name, m.msg_offset`,
            [Q],
          )
        ).rows;
        const storedIds = new Set(stored.map((r) => r.id));
        const lost = [...acked].filter((id) => !storedIds.has(id));
        const twice = stored.filter((r) => r.copies > 1).map((r) => r.id);
        // Offsets per partition run 1..n without a hole.
        const gaps: string[] = [];
        const byPartition = new Map<string, number[]>();
        for (const r of stored) byPartition.set(r.partition, [...(byPartition.get(r.partition) ?? []), Number(r.msg_offset)]);
        for (const [p, offsets] of byPartition) offsets.forEach((o, i) => o !== i + 1 && gaps.push(`${p}@${i + 1}:${o}`));

        // Every stored message reaches the consumer, and the stream counts each once.
        const deadline = Date.now() + 60000;
        const sinkRows = async () =>
          (
            await sql.query<{ count: number; window: string }>(
              `select (m.payload->>'count')::int as count, m.payload->>'window' as window
                 from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1`,
              [SINK],
            )
          ).rows;
        let windows = await sinkRows();
        const counted = () => windows.reduce((s, w) => s + w.count, 0);
        while ((delivered.size < storedIds.size || counted() < stored.length) && Date.now() < deadline) {
          await sleep(500);
          windows = await sinkRows();
        }
        await sleep(1000); // a window emitted twice would land by now
        windows = await sinkRows();
        const undelivered = [...storedIds].filter((id) => !delivered.has(id));
        const windowCopies = new Map<string, number>();
        for (const w of windows) windowCopies.set(w.window, (windowCopies.get(w.window) ?? 0) + 1);
        const windowsTwice = [...windowCopies].filter(([, n]) => n > 1);

        const metrics = (await call(b.url, 'GET', '/metrics')).body as string;
        const failovers = Number(/^queen_db_failovers_total (\d+)/m.exec(metrics)?.[1]);
        const primaryPort = /^queen_db_primary\{host="127\.0\.0\.1:(\d+)"\} 1/m.exec(metrics)?.[1];
        const failoverLines = b.lines.filter((l) => l.includes('database failover')).map((l) => JSON.parse(l) as { from: string; to: string; durationMs: number });

        const report = {
          formationMs,
          events: events.map((e) => ({
            event: e.name,
            promotionMs: e.promotedAt ? e.promotedAt - e.at : null,
            longestPushGapMs: gapAround(e),
            pushesBackAfterPromotionMs: e.promotedAt ? (pushOks.find((t) => t >= e.promotedAt!) ?? Infinity) - e.promotedAt : null,
          })),
          acknowledged: acked.size,
          stored: stored.length,
          delivered: delivered.size,
          redeliveries: [...delivered.values()].reduce((s, n) => s + n - 1, 0),
          streamCount: counted(),
          windows: windows.length,
          failovers,
          failoverLines,
          answers: Object.fromEntries(answers),
          notReadyPolls: readiness.filter((r) => !r.ready).length,
        };
        console.log(`failover drill: ${JSON.stringify(report, null, 1)}`);
        const diagnosis = JSON.stringify({ lost: lost.slice(0, 5), twice: twice.slice(0, 5), gaps: gaps.slice(0, 5), undelivered: undelivered.slice(0, 5), windowsTwice: windowsTwice.slice(0, 5), streamErrors: streamErrors.slice(-5), consumerErrors: consumerErrors.slice(-5), tail: b.lines.slice(-20) });

        expect(lost, diagnosis).toEqual([]);
        expect(twice, diagnosis).toEqual([]);
        expect(gaps, diagnosis).toEqual([]);
        expect(stored.length).toBe(storedIds.size);
        expect(undelivered, diagnosis).toEqual([]);
        expect(counted(), diagnosis).toBe(stored.length);
        expect(windowsTwice, diagnosis).toEqual([]);
        // The broker rode it out: same process, and it saw three new primaries (two crashes and the switchover).
        expect(b.exited, diagnosis).toBeUndefined();
        expect(b.child.pid).toBe(pid);
        expect(failovers, diagnosis).toBe(3);
        expect(failoverLines.map((l) => l.to), diagnosis).toHaveLength(3);
        expect(primaryPort).toBe(String(f.ports[primary]));
        for (const e of report.events) if (e.pushesBackAfterPromotionMs !== null) expect(e.pushesBackAfterPromotionMs, JSON.stringify(report.events)).toBeLessThanOrEqual(5000);
        // Not ready while no writable host answered, ready again after.
        for (const e of events.filter((x) => x.name.startsWith('primary crash'))) {
          expect(readiness.some((r) => !r.ready && r.at > e.at && r.at < e.promotedAt! + 1000), `not ready during ${e.name}`).toBe(true);
        }
        expect(readiness.at(-1)?.ready).toBe(true);
      } finally {
        await sql.end();
      }
    } finally {
      await consumer.stop();
      await stream.stop();
      await queen.close();
    }
  }, 600000);
});
