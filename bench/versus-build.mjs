// This build of the broker against another one, in the same run on the same
// PostgreSQL: the way to tell whether a change made the broker faster, when
// rates drift from run to run by more than the change (they do on a shared
// 2-core machine). Each build gets its own database of one cluster; rounds
// alternate the builds (and which goes first), and each pair of rounds is
// compared as well as the medians.
//
// Workloads (8 partitions, batch 100 unless said):
//   e2e    1 producer pushing batches of 100 round-robin, 4 consumers pop + ack; completed msg/s
//   drain  40k pushed first (not timed), 4 consumers pop + ack
//   push   4 producers, batches of 100
//   map    a queen-mq `map` stream (this tree's runner, in this process) over
//          40k messages, batch 500, into a queue sink
// CPU per message from /proc: PostgreSQL (the whole cluster), the broker,
// this process.
//
// Needs the other build: e.g.
//   git worktree add /tmp/base <commit> && (cd /tmp/base && npm ci && npm run build)
//   BENCH_OTHER_BROKER=/tmp/base/apps/broker/dist/main.js node bench/versus-build.mjs
// Without BENCH_OTHER_BROKER it says so and writes nothing (so `npm run bench`
// passes over it). Knobs: BENCH_ROUNDS (4), BENCH_WORKLOADS (e2e,drain,push,map),
// BENCH_SECONDS (5, e2e and push), BENCH_IDLE_FIRST_S (0): seconds both
// brokers idle before the first round. Builds before the young generation
// became an option (apps/broker/src/young-generation.ts) hold it at the
// size it has when their flag is set, and V8 shrinks it to 2 MB after ~10 s
// idle: 20 compares them as a broker runs after any idle stretch, 0 as one
// busy from its start. BENCH_ENV (JSON) is added to both brokers' environment,
// e.g. '{"QUEEN_FIXED_YOUNG_GENERATION":"true"}' to compare like with like.
// Writes bench/results/versus-build.json.
import { existsSync } from 'node:fs';
import pg from 'pg';
import { Queen } from '@queen-mq/client';
import { Stream } from 'queen-mq';
import { cpuSecondsOf, loadNow, parentPidOf, postgresCpuSeconds, progress, resultsHead, spawnBroker, startDatabase, table, writeResults } from './_lib.mjs';

const NAME = 'versus-build';
const OTHER = process.env.BENCH_OTHER_BROKER;
if (!OTHER || !existsSync(OTHER)) {
  progress(NAME, `skipped: set BENCH_OTHER_BROKER to another build's apps/broker/dist/main.js${OTHER ? ` (${OTHER} does not exist)` : ''}`);
  process.exit(0);
}
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const WORKLOADS = (process.env.BENCH_WORKLOADS ?? 'e2e,drain,push,map').split(',');

const loadAtStart = loadNow();
const db = await startDatabase(NAME);
const admin = new pg.Client({ connectionString: db.url });
await admin.connect();
const postmaster = parentPidOf((await admin.query('select pg_backend_pid() as pid')).rows[0].pid);
const otherDb = `${new URL(db.url).pathname.slice(1)}_other`;
await admin.query(`create database ${otherDb}`);
const otherUrl = new URL(db.url);
otherUrl.pathname = `/${otherDb}`;
const ENV = JSON.parse(process.env.BENCH_ENV ?? '{}');
const brokers = {
  'this build': await spawnBroker(`${NAME} this build`, db.url, ENV),
  'other build': await spawnBroker(`${NAME} other build`, otherUrl.toString(), ENV, [], OTHER),
};
const IDLE_FIRST_S = Number(process.env.BENCH_IDLE_FIRST_S ?? 0);
if (IDLE_FIRST_S > 0) {
  progress(NAME, `both brokers idle ${IDLE_FIRST_S} s first`);
  await new Promise((r) => setTimeout(r, IDLE_FIRST_S * 1000));
}

const payload = (i) => ({ n: i, kind: 'bench.event', customer: `c-${i % 97}`, note: 'x'.repeat(48) });
const batch = () => Array.from({ length: 100 }, (_, j) => ({ payload: payload(j) }));

async function consume(queen, queue, until, onMoved, waitMs) {
  while (!until()) {
    const r = await queen.queue(queue).pop({ batch: 100, wait: true, timeout: waitMs });
    if (!r?.messages.length) continue;
    await queen.ack(r.messages);
    onMoved(r.messages.length);
  }
}

/** One timed run of a workload against one broker; the clock and CPU readings start after any untimed setup. */
const workloads = {
  async e2e(queen, queue, start) {
    let moved = 0;
    start();
    const end = performance.now() + SECONDS * 1000;
    const over = () => performance.now() >= end;
    const producer = (async () => {
      for (let i = 0; !over(); i++) await queen.queue(queue).partition(`p${i % 8}`).push(batch());
    })();
    await Promise.all([producer, ...Array.from({ length: 4 }, () => consume(queen, queue, over, (n) => (moved += n), 200))]);
    return moved;
  },
  async drain(queen, queue, start) {
    await Promise.all(Array.from({ length: 8 }, async (_, p) => {
      for (let i = 0; i < 50; i++) await queen.queue(queue).partition(`p${p}`).push(batch());
    }));
    let moved = 0;
    start();
    await Promise.all(Array.from({ length: 4 }, () => consume(queen, queue, () => moved >= 40000, (n) => (moved += n), 100)));
    return moved;
  },
  async push(queen, queue, start) {
    let moved = 0;
    start();
    const end = performance.now() + SECONDS * 1000;
    await Promise.all([0, 1, 2, 3].map(async (w) => {
      for (let i = 0; performance.now() < end; i++) {
        await queen.queue(queue).partition(`p${(w + i * 4) % 8}`).push(batch());
        moved += 100;
      }
    }));
    return moved;
  },
  async map(queen, queue, start, url) {
    await Promise.all(Array.from({ length: 8 }, async (_, p) => {
      for (let i = 0; i < 10; i++) await queen.queue(queue).partition(`p${p}`).push(Array.from({ length: 500 }, (_, j) => ({ payload: { amount: j, k: `k${j % 50}` } })));
    }));
    start();
    const handle = await Stream.from(queen.queue(queue)).map((m) => m.data).to(queen.queue(`${queue}.sink`)).run({ queryId: `${queue}.map`, url, batchSize: 500, maxPartitions: 8, maxWaitMillis: 200 });
    while (handle.metrics().messagesTotal < 40000) await new Promise((r) => setTimeout(r, 5));
    const moved = handle.metrics().messagesTotal;
    await handle.stop();
    return moved;
  },
};

const runs = [];
for (let round = 1; round <= ROUNDS; round++) {
  for (const workload of WORKLOADS) {
    const order = round % 2 ? ['this build', 'other build'] : ['other build', 'this build'];
    for (const build of order) {
      const broker = brokers[build];
      const queen = new Queen({ url: broker.url });
      let t0 = 0;
      let c0;
      const cpu = () => ({ pg: postgresCpuSeconds(postmaster), broker: cpuSecondsOf(broker.pid), self: process.cpuUsage() });
      const moved = await workloads[workload](queen, `vs_${workload}_${round}`, () => {
        t0 = performance.now();
        c0 = cpu();
      }, broker.url);
      const seconds = (performance.now() - t0) / 1000;
      const c1 = cpu();
      await queen.close();
      const us = (s) => Math.round((s * 1e6) / moved);
      const run = {
        round, workload, build, msgPerSec: Math.round(moved / seconds), moved, seconds: Math.round(seconds * 100) / 100,
        postgresUsPerMsg: us(c1.pg - c0.pg), brokerUsPerMsg: us(c1.broker - c0.broker),
        clientUsPerMsg: us((c1.self.user + c1.self.system - c0.self.user - c0.self.system) / 1e6),
      };
      runs.push(run);
      progress(NAME, `${workload.padEnd(5)} round ${round}/${ROUNDS} ${build.padEnd(11)} ${String(run.msgPerSec).padStart(6)} msg/s`);
    }
  }
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const summary = WORKLOADS.map((workload) => {
  const of = (build) => runs.filter((r) => r.workload === workload && r.build === build);
  const mine = of('this build');
  const other = of('other build');
  const pairs = mine.map((m) => m.msgPerSec / other.find((o) => o.round === m.round).msgPerSec);
  return {
    workload,
    'this msg/s (median)': Math.round(median(mine.map((r) => r.msgPerSec))),
    'other msg/s (median)': Math.round(median(other.map((r) => r.msgPerSec))),
    'this / other (median)': Math.round((median(mine.map((r) => r.msgPerSec)) / median(other.map((r) => r.msgPerSec))) * 100) / 100,
    'rounds this build won': `${pairs.filter((p) => p > 1).length} of ${pairs.length}`,
    'PG µs this / other': `${median(mine.map((r) => r.postgresUsPerMsg))} / ${median(other.map((r) => r.postgresUsPerMsg))}`,
    'broker µs this / other': `${median(mine.map((r) => r.brokerUsPerMsg))} / ${median(other.map((r) => r.brokerUsPerMsg))}`,
    'client µs this / other': `${median(mine.map((r) => r.clientUsPerMsg))} / ${median(other.map((r) => r.clientUsPerMsg))}`,
  };
});
console.log(table(Object.keys(summary[0]), summary));

const file = await writeResults(NAME, {
  ...resultsHead(NAME, db, loadAtStart),
  settings: { rounds: ROUNDS, seconds: SECONDS, workloads: WORKLOADS, otherBroker: OTHER, idleFirstSeconds: IDLE_FIRST_S, env: ENV },
  notes: [
    'Both brokers run at once, each on its own database of one embedded PostgreSQL; rounds alternate the builds and which goes first. A pair is the two builds\' runs of one workload in one round.',
    'map: this tree\'s queen-mq runner in this process against each broker, so its client CPU is the runner\'s.',
    'CPU per message: PostgreSQL is the whole cluster (both databases; the idle one costs next to nothing), broker is that build\'s process, client is this process.',
  ],
  summary,
  runs,
});
progress(NAME, `wrote ${file}`);

await admin.end();
for (const b of Object.values(brokers)) await b.stop();
await db.stop();
