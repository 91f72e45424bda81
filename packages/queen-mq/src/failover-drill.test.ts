import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '@queen-mq/broker';
import { PgAutoFailover, pgAutoFailoverMissing, sleep, uniqueName, type NodeName } from '@queen-mq/testing';
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

const MAIN = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'apps', 'broker', 'dist', 'main.js');

/** Why the drill cannot run here, or undefined. */
function skipReason(): string | undefined {
  const missing = pgAutoFailoverMissing();
  if (missing) return missing;
  if (!existsSync(MAIN)) return `the broker is not built (${MAIN}); npm test builds it`;
  return undefined;
}
const skip = skipReason();
if (skip) console.log(`failover drill skipped: ${skip}`);

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

let formation: PgAutoFailover | undefined;
let broker: Broker | undefined;

afterAll(async () => {
  if (broker && !broker.exited) broker.child.kill('SIGKILL');
  formation?.destroy();
});

describe.skipIf(!!skip)('PostgreSQL failover drill (pg_auto_failover: monitor, primary, synchronous standby)', () => {
  it('two primary crashes, a switchover and a standby crash under push, pop/ack, transaction and stream load: nothing acknowledged lost or stored twice, same broker pid, pushes back within 5 s of each promotion', async () => {
    const ports = { monitor: await freePort(), n1: await freePort(), n2: await freePort() };
    const f = (formation = new PgAutoFailover(ports));
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
        e.promotedAt = await f.promotedAt(other(primary));
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
        const switched = f.switchover();
        e.promotedAt = await f.promotedAt(other(primary));
        await switched;
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
