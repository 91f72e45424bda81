// Join benchmark, beside the window benches. Writes bench/results/joins.json.
// Two source queues (orders, payments), 8 partitions each, one payment per
// order with the same key, pushed interleaved; an inner interval join in
// processing time (within 60 s) to a sink queue: pairs per second and input
// messages (both queues) per second, from the start of the run to the last
// pair, against a plain-SQL ceiling written for the same pairing without any
// SQL function of ours: per cycle of one partition and one side, one
// transaction taking an advisory lock, reading the side's cursor and 500
// rows, the other side's held rows of the batch's keys, inserting the pairs
// (one head move, one INSERT … unnest) and the batch's own held rows,
// deleting the held rows whose bound the side's time has passed, moving the
// cursor. Rounds alternate (runner, ceiling), twice each; the ratio compares
// the best of each.
// Knobs: BENCH_PER_PARTITION (orders per partition, 5000; as many payments),
// DATABASE_URL (else an embedded PostgreSQL).
import pg from 'pg';
import { Queen, Stream } from 'queen-mq';
import { loadNow, progress, resultsHead, spawnBroker, startDatabase, table, writeResults } from './_lib.mjs';

const NAME = 'joins';
const PARTITIONS = 8;
const BATCH = 500;
const PER_PARTITION = Number(process.env.BENCH_PER_PARTITION ?? 5000);
const PAIRS = PARTITIONS * PER_PARTITION;
const INPUTS = 2 * PAIRS;
const WITHIN_MS = 60_000;
const ORDERS = 'bench.orders';
const PAYMENTS = 'bench.payments';

const loadAtStart = loadNow();
const started = Date.now();
const db = await startDatabase(NAME);
const broker = await spawnBroker(NAME, db.url);
const sql = new pg.Pool({ connectionString: db.url, max: 4 });
const queen = new Queen({ url: broker.url });

async function http(method, path, body) {
  const res = await fetch(`${broker.url}${path}`, { method, headers: body ? { 'content-type': 'application/json' } : {}, body: body ? JSON.stringify(body) : undefined });
  const text = await res.text();
  if (res.status >= 300 && res.status !== 204) throw new Error(`${method} ${path} answered ${res.status}: ${text.slice(0, 300)}`);
  return res.status === 204 ? null : JSON.parse(text);
}

// Interleaved pushes: a chunk of orders, then their payments, partition by partition.
progress(NAME, `pushing ${INPUTS} messages`);
for (const q of [ORDERS, PAYMENTS]) await http('POST', '/api/v1/configure', { queue: q, options: { leaseTime: 30, retryLimit: 100 } });
const CHUNK = 500;
for (let i = 0; i < PER_PARTITION; i += CHUNK) {
  for (let p = 0; p < PARTITIONS; p++) {
    const ids = Array.from({ length: Math.min(CHUNK, PER_PARTITION - i) }, (_, j) => `o-${p}-${i + j}`);
    await http('POST', '/api/v1/push', { items: ids.map((id) => ({ queue: ORDERS, partition: `p${p}`, payload: { orderId: id, amount: 10 } })) });
    await http('POST', '/api/v1/push', { items: ids.map((id) => ({ queue: PAYMENTS, partition: `p${p}`, payload: { orderId: id, paid: 10 } })) });
  }
}

const count = async (queue) => Number((await sql.query('select count(*) from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1', [queue])).rows[0].count);

async function runnerRound(round) {
  const sink = `bench.pairs.${round}`;
  progress(NAME, `runner #${round}`);
  const t0 = performance.now();
  const handle = await Stream.from(queen.queue(ORDERS))
    .join(queen.queue(PAYMENTS), { within: { ms: WITHIN_MS }, key: { left: (o) => o.orderId, right: (p) => p.orderId }, select: (o, p) => ({ orderId: o.orderId, amount: o.amount, paid: p.paid }) })
    .to(queen.queue(sink))
    .run({ queryId: `bench-join-${round}`, url: broker.url, batchSize: BATCH, maxPartitions: PARTITIONS, maxWaitMillis: 200, from: 'beginning' });
  let pairs = 0;
  const deadline = Date.now() + 600_000;
  while (pairs < PAIRS && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
    pairs = await count(sink);
  }
  const seconds = (performance.now() - t0) / 1000;
  const m = handle.metrics();
  await handle.stop();
  if (pairs !== PAIRS) throw new Error(`runner round ${round}: ${pairs}/${PAIRS} pairs`);
  return { path: 'join runner', round, pairs, seconds: round2(seconds), pairsPerSec: Math.round(pairs / seconds), inputsPerSec: Math.round(INPUTS / seconds), cycles: m.cyclesTotal, errors: m.errorsTotal };
}

// The ceiling's tables: both sources copied, cursors per side, the held rows, the sink.
await sql.query(`
  create schema plain;
  create table plain.source (side text not null, partition_id int not null, msg_offset bigint not null, payload jsonb, created_at timestamptz not null, primary key (side, partition_id, msg_offset));
  create table plain.cursors (query text not null, side text not null, partition_id int not null, cursor bigint not null default 0, wm bigint, primary key (query, side, partition_id));
  create table plain.held (query text not null, partition_id int not null, side text not null, key text collate "C" not null, msg_offset bigint not null, t bigint not null, payload jsonb,
                           primary key (query, partition_id, side, key, msg_offset));
  create table plain.sink_partitions (query text not null, id int not null, head bigint not null default 0, primary key (query, id));
  create table plain.sink (query text not null, partition_id int not null, msg_offset bigint not null, id uuid not null, payload jsonb, primary key (query, partition_id, msg_offset));
  insert into plain.source select case p.queue_name when '${ORDERS}' then 'left' else 'right' end, substr(p.name, 2)::int, m.msg_offset, m.payload, m.created_at
    from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name in ('${ORDERS}', '${PAYMENTS}');`);

async function plainRound(round) {
  const query = `q${round}`;
  progress(NAME, `plain SQL #${round}`);
  await sql.query(`insert into plain.cursors (query, side, partition_id) select $1, s, g from generate_series(0, $2 - 1) g, unnest(array['left', 'right']) s`, [query, PARTITIONS]);
  await sql.query('insert into plain.sink_partitions (query, id) select $1, g from generate_series(0, $2 - 1) g', [query, PARTITIONS]);
  const client = await sql.connect();
  let pairs = 0;
  const done = new Set();
  const t0 = performance.now();
  try {
    for (let i = 0; done.size < 2 * PARTITIONS; i++) {
      const p = Math.floor(i / 2) % PARTITIONS;
      const side = i % 2 === 0 ? 'left' : 'right';
      const other = side === 'left' ? 'right' : 'left';
      if (done.has(`${side}${p}`)) continue;
      await client.query('begin');
      await client.query('select pg_advisory_xact_lock(hashtextextended($1, 0))', [`${query}:${p}`]);
      const { rows: cur } = await client.query('select cursor, wm from plain.cursors where query = $1 and side = $2 and partition_id = $3 for update', [query, side, p]);
      const { rows: msgs } = await client.query('select msg_offset, payload, created_at from plain.source where side = $1 and partition_id = $2 and msg_offset > $3 order by msg_offset limit $4', [side, p, cur[0].cursor, BATCH]);
      if (msgs.length === 0) {
        await client.query('commit');
        done.add(`${side}${p}`);
        continue;
      }
      const keys = msgs.map((m) => m.payload.orderId);
      const { rows: held } = await client.query('select key, msg_offset, t, payload from plain.held where query = $1 and partition_id = $2 and side = $3 and key = any($4::text[])', [query, p, other, keys]);
      const byKey = new Map();
      for (const h of held) byKey.set(h.key, [...(byKey.get(h.key) ?? []), h]);
      const outputs = [];
      let wm = Number(cur[0].wm ?? 0);
      for (const m of msgs) {
        const t = m.created_at.getTime();
        wm = Math.max(wm, t);
        for (const h of byKey.get(m.payload.orderId) ?? []) {
          if (Math.abs(Number(h.t) - t) > WITHIN_MS) continue;
          const [l, r] = side === 'left' ? [m.payload, h.payload] : [h.payload, m.payload];
          outputs.push(JSON.stringify({ orderId: l.orderId, amount: l.amount, paid: r.paid }));
        }
      }
      await client.query(
        `insert into plain.held (query, partition_id, side, key, msg_offset, t, payload) select $1, $2, $3, k, o, t, v from unnest($4::text[], $5::bigint[], $6::bigint[], $7::jsonb[]) as u(k, o, t, v)`,
        [query, p, side, keys, msgs.map((m) => m.msg_offset), msgs.map((m) => m.created_at.getTime()), msgs.map((m) => JSON.stringify(m.payload))]);
      await client.query('delete from plain.held where query = $1 and partition_id = $2 and side = $3 and t + $4 < $5', [query, p, other, WITHIN_MS, wm]);
      if (outputs.length) {
        const { rows: head } = await client.query('update plain.sink_partitions set head = head + $3 where query = $1 and id = $2 returning head', [query, p, outputs.length]);
        await client.query(
          `insert into plain.sink (query, partition_id, msg_offset, id, payload) select $1, $2, $3::bigint - $4::bigint + ord, gen_random_uuid(), o from unnest($5::jsonb[]) with ordinality as u(o, ord)`,
          [query, p, head[0].head, outputs.length, outputs]);
      }
      await client.query('update plain.cursors set cursor = $4, wm = $5 where query = $1 and side = $2 and partition_id = $3', [query, side, p, msgs[msgs.length - 1].msg_offset, wm]);
      await client.query('commit');
      pairs += outputs.length;
    }
  } catch (err) {
    await client.query('rollback').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
  const seconds = (performance.now() - t0) / 1000;
  if (pairs !== PAIRS) throw new Error(`ceiling round ${round}: ${pairs}/${PAIRS} pairs`);
  return { path: 'plain SQL', round, pairs, seconds: round2(seconds), pairsPerSec: Math.round(pairs / seconds), inputsPerSec: Math.round(INPUTS / seconds), cycles: null, errors: 0 };
}

const rows = [];
for (let round = 1; round <= 2; round++) {
  rows.push(await runnerRound(round));
  rows.push(await plainRound(round));
}
const best = (path) => Math.max(...rows.filter((r) => r.path === path).map((r) => r.pairsPerSec));
const ratio = Math.round((best('join runner') / best('plain SQL')) * 100) / 100;
await queen.close();
await broker.stop();
await sql.end();
await db.stop();

const results = {
  ...resultsHead(NAME, db, loadAtStart),
  settings: { partitions: PARTITIONS, perPartition: PER_PARTITION, pairs: PAIRS, inputs: INPUTS, batchSize: BATCH, withinMs: WITHIN_MS },
  notes: [
    'Both queues pre-pushed (interleaved chunks of 500 per partition); each runner round reads them from the start in a consumer group of its own (processing time: pairs on createdAt). pairsPerSec = pairs on the sink / seconds from run() to the last pair (sink counted every 100 ms); inputsPerSec = messages of both queues / the same seconds.',
    'plain SQL: per cycle of one (partition, side): advisory lock, cursor FOR UPDATE, 500 rows, the other side held rows of the batch keys, pairs in JS, one INSERT … unnest of the held rows, one DELETE of the other side rows past the bound, one head move and one INSERT … unnest of the pairs, the cursor update; one connection, no function of ours, no dedup, no HTTP.',
  ],
  summary: { 'join runner / plain-SQL ceiling (pairs per second, best of each)': ratio },
  rows,
  seconds: Math.round((Date.now() - started) / 1000),
};
const file = await writeResults(NAME, results);
console.log(`\nQueen join benchmark (${PAIRS} pairs from ${INPUTS} messages over ${PARTITIONS} partitions, batch ${BATCH}, load ${loadAtStart})\n`);
console.log(table(['path', 'round', 'pairs', 'seconds', 'pairsPerSec', 'inputsPerSec', 'cycles', 'errors'], rows));
console.log(`\njoin runner / plain-SQL ceiling: ${ratio}x; took ${results.seconds}s\nresults: ${file}`);

function round2(v) {
  return Math.round(v * 100) / 100;
}
