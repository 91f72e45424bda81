// Broker benchmark: push and push→pop→ack throughput over HTTP against the
// same work done by SQL on the same database (the ceilings), plus the
// broker's RSS. Paths of one row run in alternating rounds (interleaved() in
// _lib.mjs) so drift on a shared machine hits them alike. Writes
// bench/results/broker.json. Knobs: BENCH_SECONDS (per path and round, 2),
// BENCH_ROUNDS (3), BENCH_CONNECTIONS (4), BENCH_BATCHES (1,10,100), DATABASE_URL (else an embedded
// PostgreSQL with default, durable settings).
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { Pool } from 'undici';
import { interleaved, loadNow, mb, measure, progress, resultsHead, rssOf, rssSampler, spawnBroker, startDatabase, table, writeResults } from './_lib.mjs';

const NAME = 'broker';
const SECONDS = Number(process.env.BENCH_SECONDS ?? 2);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 4);
const BATCHES = (process.env.BENCH_BATCHES ?? '1,10,100').split(',').map(Number);
const MAX_MESSAGES = 400_000; // per round: bounds the run on a fast machine
const GROUP = '__QUEUE_MODE__';
// Issue target: push at batch 100 ≥ 50 % of the raw-SQL ceiling. Reported
// against both ceilings: the same rows (raw-messages) and an index-free table.
const TARGET = { workload: 'push', batch: 100, ratio: 0.5, paths: ['raw-messages', 'raw-insert'] };

/** ~110 bytes of JSON: a small event, the common case for a queue. */
const payload = (i) => ({ n: i, kind: 'bench.event', customer: `c-${i % 97}`, note: 'x'.repeat(48) });

const loadAtStart = loadNow();
const db = await startDatabase(NAME);
const broker = await spawnBroker(NAME, db.url);
const rss = rssSampler(broker.pid);
await rss.mark('idle');
await new Promise((r) => setTimeout(r, 1000));
const idleBytes = await rssOf(broker.pid);

const http = new Pool(broker.url, { connections: CONNECTIONS, pipelining: 1 });
const sql = new pg.Pool({ connectionString: db.url, max: CONNECTIONS });
const rows = [];

async function call(method, path, body, expect) {
  const res = await http.request({ method, path, headers: body ? { 'content-type': 'application/json' } : {}, body });
  const text = await res.body.text();
  if (res.statusCode !== expect) throw new Error(`${method} ${path} answered ${res.statusCode}: ${text.slice(0, 300)}`);
  return text;
}

async function partitionIds(queue) {
  const targets = Array.from({ length: CONNECTIONS }, (_, w) => ({ queue, partition: `p${w}` }));
  const { rows: out } = await sql.query('select partition_name, partition_id, queue_id from queen.ensure_partitions_v1($1::jsonb)', [JSON.stringify(targets)]);
  const byName = Object.fromEntries(out.map((r) => [r.partition_name, r]));
  return targets.map((t) => ({ partitionId: byName[t.partition].partition_id, queueId: byName[t.partition].queue_id }));
}

const pushBodies = (queue, b) => Array.from({ length: CONNECTIONS }, (_, w) =>
  JSON.stringify({ items: Array.from({ length: b }, (_, i) => ({ queue, partition: `p${w}`, payload: payload(i) })) }));
const sqlItems = (ids, b) => ids.map(({ partitionId }) => JSON.stringify(Array.from({ length: b }, (_, i) => ({ partition_id: partitionId, payload: payload(i) }))));

async function compare(workload, b, paths) {
  await rss.mark(`${workload} b${b}`);
  const out = await interleaved({
    rounds: ROUNDS, seconds: SECONDS, workers: CONNECTIONS, maxMessages: MAX_MESSAGES, paths,
    onRound: (path, r, m) => progress(NAME, `${workload.padEnd(13)} batch ${String(b).padStart(3)} ${path.padEnd(12)} round ${r + 1}/${ROUNDS} ${String(m.msgPerSec).padStart(7)} msg/s`),
  });
  for (const [path, result] of Object.entries(out)) {
    if (result.error) progress(NAME, `${workload} batch ${b} via ${path} FAILED: ${result.error}`);
    rows.push({ workload, batch: b, path, ...result });
  }
}

// The ceilings' tables: index-free, and shaped like queen.messages (its
// primary key and dedup index) with offsets from a sequence.
await sql.query(`create table public.bench_scratch (
  partition_id uuid not null, id uuid not null default gen_random_uuid(), transaction_id text not null,
  payload jsonb, created_at timestamptz not null default now())`);
await sql.query('create table public.bench_messages (like queen.messages including all)');
await sql.query('create sequence public.bench_offsets');

// The broker's JIT and pools warm up on a queue of their own, not counted.
{
  const warm = pushBodies('bench-warmup', 100);
  await measure({ workers: CONNECTIONS, seconds: 2, step: async (w) => (await call('POST', '/api/v1/push', warm[w], 201), 100) });
}

// --- push ---------------------------------------------------------------
for (const b of BATCHES) {
  const bodies = pushBodies(`bench-push-b${b}`, b);
  const items = sqlItems(await partitionIds(`bench-sqlpush-b${b}`), b);
  await compare('push', b, {
    broker: async (w) => (await call('POST', '/api/v1/push', bodies[w], 201), b),
    'sql-fn': async (w) => (await sql.query('select * from queen.log_push_many_v1($1::jsonb, null)', [items[w]]), b),
    'raw-messages': async (w) => {
      await sql.query(
        `insert into public.bench_messages (partition_id, msg_offset, id, transaction_id, payload, created_at)
         select (e->>'partition_id')::uuid, nextval('public.bench_offsets'), gen_random_uuid(), null, e->'payload', now()
           from jsonb_array_elements($1::jsonb) e`,
        [items[w]],
      );
      return b;
    },
    'raw-insert': async (w) => {
      await sql.query(
        `insert into public.bench_scratch (partition_id, transaction_id, payload)
         select (e->>'partition_id')::uuid, gen_random_uuid()::text, e->'payload' from jsonb_array_elements($1::jsonb) e`,
        [items[w]],
      );
      return b;
    },
  });
}

// --- push → pop → ack (each worker owns one partition: a full round per step)
for (const b of BATCHES) {
  const queue = `bench-cycle-b${b}`;
  const bodies = pushBodies(queue, b);
  const ids = await partitionIds(`bench-sqlcycle-b${b}`);
  const items = sqlItems(ids, b);
  await compare('push→pop→ack', b, {
    broker: async (w) => {
      await call('POST', '/api/v1/push', bodies[w], 201);
      const popped = JSON.parse(await call('GET', `/api/v1/pop/queue/${queue}/partition/p${w}?batch=${b}`, undefined, 200));
      const acks = popped.messages.map((m) => ({ transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId }));
      const text = acks.length === 1
        ? await call('POST', '/api/v1/ack', JSON.stringify(acks[0]), 200)
        : await call('POST', '/api/v1/ack/batch', JSON.stringify({ acknowledgments: acks }), 200);
      if (!JSON.parse(text).every((r) => r.success)) throw new Error(`ack refused: ${text.slice(0, 300)}`);
      return popped.messages.length;
    },
    'sql-fn': async (w) => {
      const { partitionId, queueId } = ids[w];
      await sql.query('select * from queen.log_push_many_v1($1::jsonb, null)', [items[w]]);
      const lease = randomUUID();
      const { rows: msgs } = await sql.query(
        `select partition_id, transaction_id from queen.log_pop_v4($1, $2, $3, $4, 1, false, $5, 'all', null) where msg_offset is not null`,
        [queueId, partitionId, GROUP, b, lease],
      );
      const acks = msgs.map((m, idx) => ({ idx, transactionId: m.transaction_id, partitionId: m.partition_id, status: 'completed', leaseId: lease }));
      const { rows: out } = await sql.query('select r_answer as r from queen.log_ack_v2($1, $2::jsonb, null, null, null, null, false)', [GROUP, JSON.stringify(acks)]);
      // Per-item results from the walk; the compact form means every item succeeded.
      if (Array.isArray(out[0].r) && !out[0].r.every((r) => r.success)) throw new Error(`sql ack refused: ${JSON.stringify(out[0].r).slice(0, 300)}`);
      return msgs.length;
    },
  });
}

await rss.mark('done');
const rssReport = await rss.stop();
await http.close();
await sql.end();
await broker.stop();
await db.stop();

// --- report ---------------------------------------------------------------
const find = (workload, batch, path) => rows.find((r) => r.workload === workload && r.batch === batch && r.path === path);
const ratio = (a, c) => (a?.msgPerSec && c?.msgPerSec ? Math.round((a.msgPerSec / c.msgPerSec) * 100) / 100 : null);
const summary = [];
for (const workload of ['push', 'push→pop→ack']) {
  for (const b of BATCHES) {
    const viaBroker = find(workload, b, 'broker');
    const viaFn = find(workload, b, 'sql-fn');
    const shaped = find(workload, b, 'raw-messages');
    const raw = find(workload, b, 'raw-insert');
    summary.push({
      workload,
      batch: b,
      'broker msg/s': viaBroker?.msgPerSec ?? viaBroker?.error ?? null,
      'p50 ms': viaBroker?.p50Ms,
      'p99 ms': viaBroker?.p99Ms,
      'sql-fn msg/s': viaFn?.msgPerSec ?? null,
      'raw-messages msg/s': shaped?.msgPerSec ?? null,
      'raw-insert msg/s': raw?.msgPerSec ?? null,
      'broker/sql-fn': ratio(viaBroker, viaFn),
      'broker/raw-messages': ratio(viaBroker, shaped),
      'broker/raw': ratio(viaBroker, raw),
    });
  }
}
const targets = TARGET.paths.map((path) => {
  const measured = ratio(find(TARGET.workload, TARGET.batch, 'broker'), find(TARGET.workload, TARGET.batch, path));
  return { workload: TARGET.workload, batch: TARGET.batch, against: path, ratio: TARGET.ratio, measured, met: measured != null && measured >= TARGET.ratio };
});
const results = {
  ...resultsHead(NAME, db, loadAtStart),
  settings: { secondsPerRound: SECONDS, rounds: ROUNDS, connections: CONNECTIONS, partitions: CONNECTIONS, payloadBytes: JSON.stringify(payload(1)).length, maxMessagesPerRound: MAX_MESSAGES },
  notes: [
    'broker: HTTP over an undici Pool to apps/broker/dist/main.js in a child process; each worker uses its own partition.',
    'sql-fn: the same rows through queen.log_push_many_v1 (and log_pop_v4 / log_ack_v2) on the same database, one statement per batch: the ceiling for the broker.',
    'raw-messages: INSERT ... SELECT of the same rows into a table shaped like queen.messages (its primary key and partial dedup index), offsets from a sequence, no transactionId (as the broker stores a push without one): the rows the broker writes, without the broker.',
    'raw-insert: INSERT ... SELECT of the same rows into an index-free scratch table: the absolute ceiling of a durable write, and the one the target is measured against.',
    'Paths of one row alternate in rounds (broker, sql-fn, raw..., broker, ...); each path sums its rounds. The broker warms up for 2 s first, not counted.',
    'push→pop→ack: per step a worker pushes a batch to its partition, pops it, and acks it; msg/s counts messages that completed the round.',
  ],
  targets,
  summary,
  rows,
  rss: { idleMB: mb(idleBytes), peakMB: mb(rssReport.peakBytes), endMB: mb(rssReport.lastBytes), phases: rssReport.phases.map((p) => ({ phase: p.phase, peakMB: mb(p.peakBytes) })) },
};
const file = await writeResults(NAME, results);

console.log(`\nQueen broker benchmark (${ROUNDS} rounds × ${SECONDS}s per path, ${CONNECTIONS} connections, ${results.settings.payloadBytes}-byte payloads, PostgreSQL ${db.settings.server_version}${db.embedded ? ' embedded' : ''}, fsync=${db.settings.fsync})\n`);
console.log(table(Object.keys(summary[0]), summary));
console.log('');
for (const t of targets) console.log(`target: push batch ${t.batch} broker/${t.against} ≥ ${t.ratio}: measured ${t.measured} (${t.met ? 'met' : 'NOT met'})`);
console.log(`broker RSS: idle ${results.rss.idleMB} MB, peak ${results.rss.peakMB} MB, end ${results.rss.endMB} MB`);
console.log(`results: ${file}`);
