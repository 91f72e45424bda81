// Where the CPU goes, per message and per process: our broker against the
// "http floor" (the plain-SQL queue behind a bare node:http server,
// _http-floor.mjs) and the "wire floor" (the same SQL answering in Queen's
// wire, driven through @queen-mq/client), all over HTTP with the same shape (batch 100, 8
// partitions; drain: 40k pushed first, 4 consumers pop + ack; e2e: 1 producer
// and 4 consumers for BENCH_SECONDS). CPU from /proc: PostgreSQL (postmaster
// and every backend), the server process, and this load generator. Rounds
// alternate. Writes bench/results/cpu-split.json.
// Knobs: BENCH_ROUNDS (2), BENCH_SECONDS (5), BENCH_DRAIN (40000), DATABASE_URL.
// Needs /proc (Linux).
import pg from 'pg';
import { Queen } from '@queen-mq/client';
import { startHttpFloor } from './_http-floor-path.mjs';
import { cpuSecondsOf, loadNow, parentPidOf, postgresCpuSeconds, progress, resultsHead, spawnBroker, startDatabase, table, writeResults } from './_lib.mjs';

const NAME = 'cpu-split';
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const DRAIN = Number(process.env.BENCH_DRAIN ?? 40000);
const PARTITIONS = 8;
const BATCH = 100;
const CONSUMERS = 4;

const loadAtStart = loadNow();
const db = await startDatabase(NAME);
const admin = new pg.Client({ connectionString: db.url });
await admin.connect();
const postmaster = parentPidOf((await admin.query('select pg_backend_pid() as pid')).rows[0].pid);

const broker = await spawnBroker(`${NAME} broker`, db.url);
const floor = await startHttpFloor(`${NAME} http floor`, db.url, { connections: CONSUMERS + 1, partitions: PARTITIONS, batch: BATCH });
const queen = new Queen({ url: broker.url });
const payload = (i) => ({ n: i, kind: 'bench.event', customer: `c-${i % 97}`, note: 'x'.repeat(48) });
const batch = () => Array.from({ length: BATCH }, (_, j) => payload(j));

const wire = new Queen({ url: floor.url });
/** A server driven through @queen-mq/client: the broker, or the wire floor (the floor's /api/v1 routes). */
const queenPath = (pid, client) => ({
  pid,
  setup: async () => {},
  push: (q, p) => client.queue(q).partition(`p${p}`).push(batch().map((x) => ({ payload: x }))),
  async consume(q) {
    const r = await client.queue(q).pop({ batch: BATCH, wait: true, timeout: 100 });
    if (!r?.messages.length) return 0;
    await client.ack(r.messages);
    return r.messages.length;
  },
});

const paths = {
  broker: queenPath(broker.pid, queen),
  'wire floor': queenPath(floor.pid, wire),
  'http floor': {
    pid: floor.pid,
    setup: (q) => floor.setup(q),
    push: (q, p) => floor.push(q, p, batch()),
    async consume(q) {
      const n = await floor.consume(q);
      if (!n) await new Promise((r) => setTimeout(r, 5));
      return n;
    },
  },
};

const snap = (pid) => ({ pg: postgresCpuSeconds(postmaster), server: cpuSecondsOf(pid), client: process.cpuUsage(), at: performance.now() });
const perMessage = (a, b, n) => ({
  msgPerSec: n / ((b.at - a.at) / 1000),
  postgres: ((b.pg - a.pg) * 1e6) / n,
  server: ((b.server - a.server) * 1e6) / n,
  client: (b.client.user + b.client.system - a.client.user - a.client.system) / n,
});

async function drain(path, queue) {
  await Promise.all(Array.from({ length: PARTITIONS }, async (_, p) => {
    for (let i = 0; i < DRAIN / PARTITIONS / BATCH; i++) await path.push(queue, p);
  }));
  const s0 = snap(path.pid);
  let done = 0;
  await Promise.all(Array.from({ length: CONSUMERS }, async () => {
    while (done < DRAIN) {
      const n = await path.consume(queue);
      done += n;
    }
  }));
  return perMessage(s0, snap(path.pid), done);
}

async function endToEnd(path, queue) {
  const end = performance.now() + SECONDS * 1000;
  const over = () => performance.now() >= end;
  const s0 = snap(path.pid);
  let done = 0;
  await Promise.all([
    (async () => {
      for (let i = 0; !over(); i++) await path.push(queue, i % PARTITIONS);
    })(),
    ...Array.from({ length: CONSUMERS }, async () => {
      while (!over()) {
        const n = await path.consume(queue);
        done += n;
      }
    }),
  ]);
  return perMessage(s0, snap(path.pid), done);
}

const runs = {};
let seq = 0;
for (let round = 0; round < ROUNDS; round++) {
  const order = ['broker', 'wire floor', 'http floor'];
  for (const name of round % 2 ? order.reverse() : order) {
    for (const [workload, run] of [['drain', drain], ['e2e', endToEnd]]) {
      const queue = `split_${workload}_${seq++}`;
      await paths[name].setup(queue);
      const m = await run(paths[name], queue);
      (runs[`${workload}\u0000${name}`] ??= []).push(m);
      progress(NAME, `${workload.padEnd(5)} ${name.padEnd(10)} round ${round + 1}/${ROUNDS} ${Math.round(m.msgPerSec)} msg/s, ${Math.round(m.postgres + m.server + m.client)} µs CPU per message`);
    }
  }
}

const round1 = (x) => Math.round(x);
const rows = Object.entries(runs).map(([key, list]) => {
  const [workload, path] = key.split('\u0000');
  const avg = (f) => list.reduce((a, m) => a + m[f], 0) / list.length;
  return { workload, path, 'msg/s': round1(avg('msgPerSec')), 'postgres µs': round1(avg('postgres')), 'server µs': round1(avg('server')), 'client µs': round1(avg('client')),
    'total µs': round1(avg('postgres') + avg('server') + avg('client')),
    // How much of the machine the three processes kept busy: below its core
    // count, the path waits (commits, round trips) rather than computes.
    'cores busy': Math.round(avg('msgPerSec') * (avg('postgres') + avg('server') + avg('client')) / 1e4) / 100 };
});
console.log(table(['workload', 'path', 'msg/s', 'postgres µs', 'server µs', 'client µs', 'total µs', 'cores busy'], rows));
const file = await writeResults(NAME, {
  ...resultsHead(NAME, db, loadAtStart),
  settings: { rounds: ROUNDS, seconds: SECONDS, drain: DRAIN, partitions: PARTITIONS, batch: BATCH, consumers: CONSUMERS },
  notes: [
    'CPU per message moved, by process, from /proc: postgres = postmaster with its reaped children plus every live backend; server = the broker or the floor process; client = this load generator. cores busy = msg/s × total CPU per message.',
    "wire floor: the floor process's /api/v1 routes (bench/_http-floor.mjs), the same plain SQL answering in Queen's wire, driven through @queen-mq/client as the broker is.",
  ],
  rows,
  runs,
});
progress(NAME, `wrote ${file}`);

await queen.close();
await wire.close();
await broker.stop();
await floor.stop();
await admin.end();
await db.stop();
