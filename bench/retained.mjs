// The log grows: push throughput (batch 100, 4 producers over HTTP) on an
// empty database, then again once BENCH_RETAINED messages (10M by default)
// are retained in the partitions being pushed to, alternated with pushes to
// fresh partitions of the same database. The hot path must not slow down as
// the log grows (target: ≥ 80 % of the empty-log rate) and must leave no dead
// tuples in queen.messages (nothing on it updates or deletes a message row).
// Writes bench/results/retained.json. Knobs: BENCH_RETAINED (10000000),
// BENCH_SECONDS (per round, 5), BENCH_ROUNDS (3), DATABASE_URL.
import pg from 'pg';
import { Queen } from '@queen-mq/client';
import { loadNow, progress, resultsHead, spawnBroker, startDatabase, table, writeResults } from './_lib.mjs';

const NAME = 'retained';
const RETAINED = Number(process.env.BENCH_RETAINED ?? 10_000_000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const PRODUCERS = 4;
const FILL_BATCH = 10_000;

const payload = (i) => ({ n: i, kind: 'bench.event', customer: `c-${i % 97}`, note: 'x'.repeat(48) });
const items = Array.from({ length: 100 }, (_, i) => ({ payload: payload(i) }));

const loadAtStart = loadNow();
const db = await startDatabase(NAME);
const broker = await spawnBroker(NAME, db.url);
const sql = new pg.Pool({ connectionString: db.url, max: 2 });
const queen = new Queen({ url: broker.url });

/** msg/s of PRODUCERS concurrent batch-100 pushes to queue `q`, one partition each. */
async function pushRate(q) {
  let pushed = 0;
  const started = performance.now();
  const end = started + SECONDS * 1000;
  await Promise.all(Array.from({ length: PRODUCERS }, async (_, w) => {
    while (performance.now() < end) {
      await queen.queue(q).partition(`p${w}`).push(items);
      pushed += items.length;
    }
  }));
  return Math.round(pushed / ((performance.now() - started) / 1000));
}

const sum = (xs) => xs.reduce((a, b) => a + b, 0);
progress(NAME, 'warming up');
await pushRate('warmup');
const empty = [];
for (let r = 0; r < ROUNDS; r++) {
  empty.push(await pushRate(`empty${r}`));
  progress(NAME, `empty log round ${r + 1}/${ROUNDS}: ${empty.at(-1)} msg/s`);
}

// Fill: RETAINED messages into the four partitions of queue "big", through
// the allocator itself (two connections, 10k items a call).
await queen.queue('big').partition('p0').push([{ payload: 'first' }]);
const { rows: parts } = await sql.query('select * from queen.ensure_partitions_v1($1::jsonb)', [JSON.stringify(Array.from({ length: PRODUCERS }, (_, w) => ({ queue: 'big', partition: `p${w}` })))]);
const fillItems = (pid) => JSON.stringify(Array.from({ length: FILL_BATCH }, (_, i) => ({ partition_id: pid, payload: payload(i) })));
const calls = Math.ceil(RETAINED / FILL_BATCH);
let done = 0;
const fillStart = performance.now();
await Promise.all([0, 1].map(async (c) => {
  for (let i = c; i < calls; i += 2) {
    await sql.query('select count(*) from queen.log_push_many_v1($1::jsonb, null)', [fillItems(parts[i % parts.length].partition_id)]);
    done += 1;
    if (done % 50 === 0) progress(NAME, `filled ${(done * FILL_BATCH).toLocaleString()} / ${RETAINED.toLocaleString()}`);
  }
}));
const fillSeconds = (performance.now() - fillStart) / 1000;
await sql.query('vacuum analyze queen.messages');
const deadBefore = (await sql.query(`select n_dead_tup::bigint as n from pg_stat_user_tables where schemaname = 'queen' and relname = 'messages'`)).rows[0].n;

const full = [];
const fresh = [];
for (let r = 0; r < ROUNDS; r++) {
  full.push(await pushRate('big'));
  fresh.push(await pushRate(`fresh${r}`));
  progress(NAME, `retained round ${r + 1}/${ROUNDS}: into the full partitions ${full.at(-1)} msg/s, into fresh ones ${fresh.at(-1)} msg/s`);
}
// Stats reach pg_stat_user_tables within a second.
await new Promise((r) => setTimeout(r, 1500));
const stats = (await sql.query(`select n_live_tup::bigint as live, n_dead_tup::bigint as dead, pg_size_pretty(pg_total_relation_size('queen.messages')) as size
                                  from pg_stat_user_tables where schemaname = 'queen' and relname = 'messages'`)).rows[0];

const emptyRate = Math.round(sum(empty) / empty.length);
const fullRate = Math.round(sum(full) / full.length);
const freshRate = Math.round(sum(fresh) / fresh.length);
const ratio = Math.round((fullRate / emptyRate) * 100) / 100;
const rows = [
  { phase: 'empty log', msgPerSec: emptyRate, rounds: empty.join(' / ') },
  { phase: `${RETAINED.toLocaleString()} retained, same partitions`, msgPerSec: fullRate, rounds: full.join(' / ') },
  { phase: `${RETAINED.toLocaleString()} retained, fresh partitions`, msgPerSec: freshRate, rounds: fresh.join(' / ') },
];
const summary = [
  { measure: 'push b100 with the log full / empty', value: ratio, target: '≥ 0.8', met: ratio >= 0.8 ? 'yes' : 'no' },
  { measure: 'dead tuples in queen.messages after the pushes', value: String(stats.dead), target: '0', met: String(stats.dead) === String(deadBefore) ? 'yes' : 'no' },
];
console.log(table(['phase', 'msgPerSec', 'rounds'], rows));
console.log();
console.log(table(['measure', 'value', 'target', 'met'], summary));
const file = await writeResults(NAME, {
  ...resultsHead(NAME, db, loadAtStart),
  settings: { retained: RETAINED, seconds: SECONDS, rounds: ROUNDS, producers: PRODUCERS, batch: 100 },
  fill: { seconds: Math.round(fillSeconds), msgPerSec: Math.round(RETAINED / fillSeconds) },
  rows, summary, messagesTable: stats,
});
progress(NAME, `wrote ${file}`);
await queen.close();
await sql.end();
await broker.stop();
await db.stop();
