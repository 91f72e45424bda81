#!/usr/bin/env node
// Flat at scale (issue 31): what a push, a pop+ack, a wildcard pop, /metrics
// and the listings cost on a fresh database, and again after it holds
// QUEUES queues x 10 partitions with pending messages plus one queue of
// BIG partitions where one holds a message. One run, two databases on one
// PostgreSQL: the empty round runs on one, the full round on the other, and
// then push and pop+ack are measured again on both, rounds alternated
// (--ratio-rounds), so the full/empty ratios do not follow the machine's
// drift between the rounds; a broker per database.
// Each round also measures the quiet times (_quiet.mjs): the idle floor (CPU
// of the broker and of PostgreSQL while nothing happens), PARKED long-poll
// pops parked on as many distinct queues (CPU, RSS, and the wake latency of
// one push to a parked queue), and the maintenance passes (_maintenance-pass.mjs).
//   node bench/scale.mjs [--queues 10000] [--big 50000] [--seconds 3] [--parked 10000]
//                        [--idle-seconds 10] [--wake-samples 60] [--ratio-rounds 3]
//   npm run bench -- scale --queues 2000
// PARKED pops hold a socket each in this process and in the broker: `ulimit -n`
// must allow them (plus a few hundred) in both.
// Writes bench/results/scale.json.
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { ROOT, loadNow, measure, mb, percentile, progress, resultsHead, rssOf, spawnBroker, startDatabase, table, writeResults } from './_lib.mjs';
import { maintenancePasses } from './_maintenance-pass.mjs';
import { cpuWindow, idleFloor, parkedPops, postmasterOf } from './_quiet.mjs';

const NAME = 'scale';
const { values: args } = parseArgs({
  options: {
    queues: { type: 'string', default: '10000' }, big: { type: 'string', default: '50000' }, seconds: { type: 'string', default: '3' },
    parked: { type: 'string', default: '10000' }, 'idle-seconds': { type: 'string', default: '10' }, 'wake-samples': { type: 'string', default: '60' },
    'ratio-rounds': { type: 'string', default: '3' },
  },
});
const QUEUES = Number(args.queues);
const BIG = Number(args.big);
const SECONDS = Number(args.seconds);
const PARKED = Number(args.parked);
const IDLE_SECONDS = Number(args['idle-seconds']);
const WAKE_SAMPLES = Number(args['wake-samples']);
const RATIO_ROUNDS = Number(args['ratio-rounds']);
/** How long a broker started for the alternated rounds idles first: the other one has idled, and V8 runs a broker differently after its first idle stretch (bench/versus-build.mjs). */
const IDLE_FIRST_MS = 20_000;
/** A parked pop's timeout: longer than parking them all, the window and the wake samples take. */
const PARKED_TIMEOUT_MS = 290_000;
/** The broker's QUEEN_PARTITION_CLEANUP_S: the deleting cleanup pass waits this long after retention emptied its partitions. */
const CLEANUP_SECONDS = 2;
const PARTITIONS = 10;
const SEED_BATCH = 500;
const GROUP = '__QUEUE_MODE__';

const loadAtStart = loadNow();
const db = await startDatabase(NAME);
const BROKER_ENV = {
  QUEEN_MAX_CONNECTIONS: String(PARKED + 1000),
  // The periodic maintenance pass stays out of the CPU windows; its cost is measured directly.
  QUEEN_RETENTION_INTERVAL_MS: '3600000',
  QUEEN_PARTITION_CLEANUP_S: String(CLEANUP_SECONDS),
};
/** The broker and the pool of the database the current round measures (the empty one, then the full one). */
let broker = await spawnBroker(NAME, db.url, BROKER_ENV);
const emptySql = new pg.Pool({ connectionString: db.url, max: 2 });
let sql = emptySql;
const postmaster = await postmasterOf(sql);

/** A second database on db's PostgreSQL, dropped by `drop()`. */
async function siblingDatabase(suffix) {
  const u = new URL(db.url);
  const name = `${u.pathname.slice(1)}_${suffix}`;
  await emptySql.query(`create database ${name}`);
  u.pathname = `/${name}`;
  return { url: u.toString(), drop: () => emptySql.query(`drop database if exists ${name} with (force)`) };
}

/** A request to the current broker (or to the server at `base`); a 4xx/5xx throws. */
async function call(method, path, body, base = broker.url) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status >= 400) throw new Error(`${method} ${path}: ${res.status} ${text.slice(0, 300)}`);
  return { status: res.status, text, json: () => (text ? JSON.parse(text) : null) };
}
const push = (items, base) => call('POST', '/api/v1/push', { items }, base);
/** A seeding push, tried again (up to 5 times) when a loaded machine timed it out. */
async function seedPush(items) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await push(items);
    } catch (err) {
      if (attempt >= 5 || !/ 503 /.test(err.message)) throw err;
      progress(NAME, `seeding push timed out (${err.message.slice(0, 80)}); again`);
    }
  }
}
const ackAll = (messages) =>
  call('POST', '/api/v1/ack/batch', { acknowledgments: messages.map((m) => ({ transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, offset: m.offset })) });
/** Pops once without waiting and acks what came: the messages it moved; `popMs`, when given, gets the pop's own milliseconds. */
async function popAck(path, popMs) {
  const t = performance.now();
  const r = await call('GET', `${path}${path.includes('?') ? '&' : '?'}wait=false`);
  popMs?.push(performance.now() - t);
  if (r.status !== 200) return 0;
  const { messages } = r.json();
  if (messages.length) await ackAll(messages);
  return messages.length;
}
/** p50/p99 of milliseconds. */
function quantiles(ms) {
  const sorted = [...ms].sort((a, b) => a - b);
  const r = (v) => Math.round(v * 100) / 100;
  return { n: ms.length, p50Ms: r(percentile(sorted, 50)), p99Ms: r(percentile(sorted, 99)) };
}
/** p50/p99 of `n` timed calls of `fn` (ms): its whole call, or the milliseconds it answers. */
async function timed(n, fn) {
  const ms = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    const own = await fn(i);
    ms.push(typeof own === 'number' ? own : performance.now() - t);
  }
  return quantiles(ms);
}

/**
 * measure() of one worker for SECONDS, with the CPU the broker and PostgreSQL
 * spent per step meanwhile (µs): where a slower step's time went.
 */
async function measureSplit(step) {
  let m;
  const w = await cpuWindow({ brokerPid: broker.pid, postmaster, during: async () => (m = await measure({ workers: 1, seconds: SECONDS, step })) });
  const perStep = (cores) => Math.round((cores * w.seconds * 1e6) / m.steps);
  return { ...m, brokerUsPerStep: perStep(w.brokerCores), postgresUsPerStep: perStep(w.postgresCores) };
}

/** One round of every measurement; `tag` names the queues it creates. */
async function round(tag, { bigQueue = null, someQueue = null, seededQueues = 0 } = {}) {
  const out = {};
  progress(NAME, `[${tag}] idle floor: ${IDLE_SECONDS} s with nothing sent`);
  out.idle = await idleFloor({ brokerPid: broker.pid, postmaster, sql, seconds: IDLE_SECONDS, url: broker.url });
  progress(NAME, `[${tag}] idle: broker ${out.idle.brokerCores} cores, PostgreSQL ${out.idle.postgresCores} cores, ${out.idle.transactionsPerSecond} transactions/s`);
  progress(NAME, `[${tag}] push b100 / b1 and pop+ack b10 on one partition`);
  Object.assign(out, await hotPath(tag));

  progress(NAME, `[${tag}] wildcard pop on a queue of ${PARTITIONS} partitions`);
  const small = someQueue ?? `small-${tag}`;
  if (!someQueue) await push(Array.from({ length: PARTITIONS }, (_, p) => ({ queue: small, partition: `p${p}`, payload: 0 })));
  out.wildcardPopAck10 = await timed(100, async (i) => {
    await push([{ queue: small, partition: `p${i % PARTITIONS}`, payload: i }]);
    const t = performance.now();
    const moved = await popAck(`/api/v1/pop/queue/${small}?batch=1`);
    if (moved !== 1) throw new Error(`wildcard pop on ${small} moved ${moved}`);
    return performance.now() - t;
  });
  if (bigQueue) {
    progress(NAME, `[${tag}] wildcard pop on a queue of ${BIG} partitions, one holding a message`);
    const popMs = [];
    out.wildcardPopAckBig = await timed(50, async (i) => {
      await push([{ queue: bigQueue, partition: `p${i % 7}`, payload: i }]);
      const t = performance.now();
      const moved = await popAck(`/api/v1/pop/queue/${bigQueue}?batch=1`, popMs);
      if (moved !== 1) throw new Error(`wildcard pop on ${bigQueue} moved ${moved}`);
      return performance.now() - t;
    });
    // The pop alone: what a consumer waits for before it has the message.
    out.wildcardPopBig = quantiles(popMs);
  }
  // The parked pops' re-check asks PostgreSQL this about each line parked
  // since the last one (wait-room.ts): a line of a queue with nothing pending
  // reads every partition of it.
  progress(NAME, `[${tag}] the re-check's question for one parked line`);
  const lineProbe = (queue) => timed(20, () => sql.query('select queen.log_lines_pending_v1($1, $2, $3)', [[queue], [GROUP], [null]]));
  out.recheckLine = { small: await lineProbe(small), ...(bigQueue ? { big: await lineProbe(bigQueue) } : {}) };

  progress(NAME, `[${tag}] /metrics and listings`);
  let metricsBytes = 0;
  out.metrics = { ...(await timed(5, async () => { metricsBytes = (await call('GET', '/metrics')).text.length; })), bytes: 0 };
  out.metrics.bytes = metricsBytes;
  const listing = {
    queues: '/api/v1/resources/queues?limit=100',
    oneQueue: `/api/v1/resources/queues/${someQueue ?? small}`,
    groups: '/api/v1/consumer-groups?limit=100',
    dlq: '/api/v1/dlq?limit=100',
    streamQueries: '/streams/v1/queries?limit=100',
    // Without ?limit= the console route answers its default page of 1000 queues.
    consoleQueues: '/api/v1/console/queues',
    // What the console asks for: a page of 100, deeper pages, a name search.
    consolePage: '/api/v1/console/queues?limit=100&offset=0',
    consoleDeepPage: `/api/v1/console/queues?limit=100&offset=${Math.max(0, Math.floor(QUEUES / 2))}`,
    consoleSearch: '/api/v1/console/queues?limit=100&search=q12',
    queuesSearch: '/api/v1/resources/queues?limit=100&search=q12',
    groupsSearch: '/api/v1/consumer-groups?limit=100&search=QUEUE',
  };
  out.listings = {};
  for (const [name, path] of Object.entries(listing)) {
    let bytes = 0;
    try {
      out.listings[name] = { ...(await timed(10, async () => { bytes = (await call('GET', path)).text.length; })), bytes };
      out.listings[name].bytes = bytes;
    } catch (err) {
      out.listings[name] = { error: err.message.slice(0, 200) };
    }
  }
  out.brokerRssMb = mb(await rssOf(broker.pid));

  // Parked pops: on the seeded queues as a named group subscribed from now
  // (their pending messages are not its), the rest on queues that do not exist yet.
  progress(NAME, `[${tag}] ${PARKED} long-poll pops parked on ${PARKED} distinct queues`);
  const targets = Array.from({ length: PARKED }, (_, i) =>
    i < seededQueues ? { queue: `q${i}`, query: '&consumerGroup=parked&subscriptionMode=new' } : { queue: `park-${tag}-${i}` });
  out.parked = await parkedPops({
    url: broker.url, brokerPid: broker.pid, postmaster, sql, targets, seconds: IDLE_SECONDS, samples: WAKE_SAMPLES, timeoutMs: PARKED_TIMEOUT_MS,
    push: (queue, payload) => push([{ queue, partition: 'p0', payload }]), log: (text) => progress(NAME, `[${tag}] ${text}`),
  });
  progress(NAME, `[${tag}] parked: broker ${out.parked.brokerCores} cores, PostgreSQL ${out.parked.postgresCores} cores, RSS ${out.parked.brokerRssMb} MB, wake p99 ${out.parked.wake.p99Ms} ms`);

  out.maintenance = await maintenancePasses({
    call, push, sql, brokerPid: broker.pid, postmaster, tag, cleanupSeconds: CLEANUP_SECONDS, log: (text) => progress(NAME, text),
    retained: Array.from({ length: seededQueues }, (_, i) => `q${i}`),
  });
  return out;
}

/** QUEUES queues x PARTITIONS partitions, one pending message each, pushed over HTTP. */
async function seed() {
  const started = Date.now();
  const items = [];
  for (let q = 0; q < QUEUES; q++) for (let p = 0; p < PARTITIONS; p++) items.push({ queue: `q${q}`, partition: `p${p}`, payload: { q, p } });
  for (let i = 0; i < items.length; i += SEED_BATCH) {
    await seedPush(items.slice(i, i + SEED_BATCH));
    if ((i / SEED_BATCH) % 40 === 0) progress(NAME, `seeded ${Math.min(i + SEED_BATCH, items.length)} of ${items.length} partitions`);
  }
  // One queue of BIG partitions, each pushed once and consumed (its cursor at its head).
  const big = 'big';
  for (let i = 0; i < BIG; i += SEED_BATCH) {
    await seedPush(Array.from({ length: Math.min(SEED_BATCH, BIG - i) }, (_, j) => ({ queue: big, partition: `p${i + j}`, payload: 0 })));
  }
  await sql.query(
    `insert into queen.cursors (partition_id, consumer_group, cursor_offset)
     select p.id, $2, p.head_offset from queen.partitions p where p.queue_name = $1
     on conflict (partition_id, consumer_group) do update set cursor_offset = excluded.cursor_offset, lease_id = null, lease_expires_at = null`,
    [big, GROUP],
  );
  // The queue-mode group's first wildcard pop lists it for the queue, reading
  // every partition once (its pending set, issue 31); what is measured is
  // the pops after, as a consumer of the queue sees them. Timed apart.
  const listing = performance.now();
  await call('GET', `/api/v1/pop/queue/${big}?wait=false`);
  firstBigPopMs = Math.round(performance.now() - listing);
  return { seconds: Math.round((Date.now() - started) / 100) / 10, bigQueue: big };
}

/** Push b100, push b1 and pop+ack b10 on one partition of a queue of `tag`. */
async function hotPath(tag) {
  const hot = `hot-${tag}`;
  const b100 = Array.from({ length: 100 }, (_, i) => ({ queue: hot, partition: 'p', payload: { i } }));
  return {
    pushB100: await measureSplit(async () => (await push(b100), 100)),
    pushB1: await measureSplit(async () => (await push([{ queue: hot, partition: 'p', payload: 1 }]), 1)),
    popAckB10: await measureSplit(() => popAck(`/api/v1/pop/queue/${hot}/partition/p?batch=10`)),
  };
}

/**
 * The hot path on the empty and on the full database, RATIO_ROUNDS rounds,
 * their order swapped each round; per measure, each round's result and
 * the median of msg/s and of p50.
 */
async function alternated(brokers) {
  const runs = { empty: [], full: [] };
  for (let r = 0; r < RATIO_ROUNDS; r++) {
    for (const which of r % 2 ? ['full', 'empty'] : ['empty', 'full']) {
      progress(NAME, `[alternated ${r + 1}/${RATIO_ROUNDS}] ${which}: push b100, b1, pop+ack b10`);
      broker = brokers[which];
      runs[which].push(await hotPath('alternated'));
    }
  }
  const median = (xs) => percentile([...xs].sort((a, b) => a - b), 50);
  const out = {};
  for (const which of ['empty', 'full']) {
    out[which] = {};
    for (const k of ['pushB100', 'pushB1', 'popAckB10']) {
      const rs = runs[which].map((x) => x[k]);
      out[which][k] = {
        msgPerSec: median(rs.map((x) => x.msgPerSec)), p50Ms: median(rs.map((x) => x.p50Ms)), p99Ms: median(rs.map((x) => x.p99Ms)),
        brokerUsPerStep: median(rs.map((x) => x.brokerUsPerStep)), postgresUsPerStep: median(rs.map((x) => x.postgresUsPerStep)), rounds: rs,
      };
    }
  }
  return out;
}

/**
 * The same PARKED long-poll pops parked on a bare node:http server
 * (_http-floor.mjs, its wire floor: a Set per queue, a timer per pop):
 * what any Node broker pays for the sockets and requests, so the
 * broker's parked RSS reads against it.
 */
async function parkedOnFloor() {
  // Stopped by the run's `finally` as well, should parking fail.
  const floor = await spawnBroker(NAME, db.url, {}, [], join(ROOT, 'bench/_http-floor.mjs'));
  brokers.push(floor);
  progress(NAME, `[floor] ${PARKED} long-poll pops parked on a bare node:http server`);
  const r = await parkedPops({
    url: floor.url, brokerPid: floor.pid, postmaster, sql: emptySql, targets: Array.from({ length: PARKED }, (_, i) => ({ queue: `park-floor-${i}` })),
    seconds: IDLE_SECONDS, samples: WAKE_SAMPLES, timeoutMs: PARKED_TIMEOUT_MS,
    push: (queue, payload) => push([{ queue, partition: 'p0', payload }], floor.url), log: (text) => progress(NAME, `[floor] ${text}`),
  });
  await floor.stop();
  progress(NAME, `[floor] parked: RSS ${r.brokerRssBeforeMb} -> ${r.brokerRssMb} MB, wake p99 ${r.wake.p99Ms} ms`);
  return { parked: r.parked, brokerRssBeforeMb: r.brokerRssBeforeMb, brokerRssMb: r.brokerRssMb, brokerCores: r.brokerCores, wake: r.wake };
}

let results;
let firstBigPopMs = null;
let fullDb = null;
const brokers = [broker];
try {
  const empty = await round('empty');
  // The full round gets its own database and broker; the empty one's broker
  // stops meanwhile, so it adds nothing to the full round's CPU windows.
  await broker.stop();
  fullDb = await siblingDatabase('full');
  sql = new pg.Pool({ connectionString: fullDb.url, max: 2 });
  broker = await spawnBroker(NAME, fullDb.url, BROKER_ENV);
  brokers.push(broker);
  progress(NAME, `seeding ${QUEUES} queues x ${PARTITIONS} partitions and one queue of ${BIG}`);
  const seeded = await seed();
  const counts = (await sql.query(`select (select count(*) from queen.queues)::int as queues, (select count(*) from queen.partitions)::int as partitions`)).rows[0];
  progress(NAME, `seeded in ${seeded.seconds}s: ${JSON.stringify(counts)}`);
  const full = await round('full', { bigQueue: seeded.bigQueue, someQueue: 'q0', seededQueues: QUEUES });
  const fullBroker = broker;
  const emptyBroker = await spawnBroker(NAME, db.url, BROKER_ENV);
  brokers.push(emptyBroker);
  progress(NAME, `a broker on the empty database idles ${IDLE_FIRST_MS / 1000} s before the alternated rounds`);
  await new Promise((r) => setTimeout(r, IDLE_FIRST_MS));
  const alt = await alternated({ empty: emptyBroker, full: fullBroker });
  for (const b of brokers) await b.stop();
  const floorParked = await parkedOnFloor();
  results = {
    ...resultsHead(NAME, db, loadAtStart),
    options: { queues: QUEUES, partitionsPerQueue: PARTITIONS, bigQueuePartitions: BIG, seconds: SECONDS, parked: PARKED, idleSeconds: IDLE_SECONDS, wakeSamples: WAKE_SAMPLES, ratioRounds: RATIO_ROUNDS },
    seedSeconds: seeded.seconds, firstBigPopMs, counts, empty, full, alternated: alt, floorParked,
  };
} finally {
  for (const b of brokers) await b.stop();
  if (sql !== emptySql) await sql.end();
  await fullDb?.drop();
  await emptySql.end();
  await db.stop();
}

const rows = [];
const ratio = (a, b) => (a && b ? Math.round((b / a) * 100) / 100 : null);
const hotRow = (x) => `${x.msgPerSec} msg/s p50 ${x.p50Ms} p99 ${x.p99Ms}; µs/step broker ${x.brokerUsPerStep} pg ${x.postgresUsPerStep}`;
for (const k of ['pushB100', 'pushB1', 'popAckB10']) {
  const e = results.alternated.empty[k];
  const f = results.alternated.full[k];
  rows.push({ measure: `${k}, median of ${RATIO_ROUNDS} alternated`, empty: hotRow(e), full: hotRow(f), 'full/empty': ratio(e.msgPerSec, f.msgPerSec) });
}
for (const k of ['pushB100', 'pushB1', 'popAckB10']) {
  const e = results.empty[k];
  const f = results.full[k];
  rows.push({ measure: `${k}, in its round`, empty: hotRow(e), full: hotRow(f), 'full/empty': ratio(e.msgPerSec, f.msgPerSec) });
}
for (const k of ['wildcardPopAck10', 'wildcardPopAckBig', 'wildcardPopBig']) {
  const e = results.empty[k];
  const f = results.full[k];
  rows.push({ measure: k, empty: e ? `p50 ${e.p50Ms} p99 ${e.p99Ms} ms` : '', full: f ? `p50 ${f.p50Ms} p99 ${f.p99Ms} ms` : '' });
}
rows.push({ measure: 're-check of one parked line', empty: `p50 ${results.empty.recheckLine.small.p50Ms} ms (${PARTITIONS} partitions)`, full: `p50 ${results.full.recheckLine.small.p50Ms} ms (${PARTITIONS}), ${results.full.recheckLine.big?.p50Ms} ms (${BIG})` });
rows.push({ measure: 'metrics', empty: `${results.empty.metrics.bytes} B p50 ${results.empty.metrics.p50Ms} ms`, full: `${results.full.metrics.bytes} B p50 ${results.full.metrics.p50Ms} ms` });
for (const k of Object.keys(results.full.listings)) {
  const e = results.empty.listings[k];
  const f = results.full.listings[k];
  const show = (x) => (x.error ? `error: ${x.error.slice(0, 40)}` : `p50 ${x.p50Ms} ms, ${x.bytes} B`);
  rows.push({ measure: `list ${k}`, empty: show(e), full: show(f) });
}
rows.push({ measure: 'broker RSS MB', empty: results.empty.brokerRssMb, full: results.full.brokerRssMb });
const cpu = (w) => `broker ${w.brokerCores} / pg ${w.postgresCores} cores, ${w.transactionsPerSecond} tx/s`;
rows.push({ measure: 'idle floor', empty: cpu(results.empty.idle), full: cpu(results.full.idle) });
rows.push({ measure: `${PARKED} parked pops, 32 s after parking`, empty: cpu({ ...results.empty.parked.afterParking, transactionsPerSecond: '-' }), full: cpu({ ...results.full.parked.afterParking, transactionsPerSecond: '-' }) });
const recount = (r) => (r.totalsRecount ? `${r.totalsRecount.seconds} s, PostgreSQL ${r.totalsRecount.postgresCores} cores${r.totalsRecount.leftAtEnd ? `, ${r.totalsRecount.leftAtEnd} left` : ''}` : '-');
rows.push({ measure: 'listing totals recount after parking', empty: recount(results.empty.parked), full: recount(results.full.parked) });
rows.push({ measure: 'wait for the broker to settle (2 x 5 s under 0.02 cores)', empty: `${results.empty.parked.gcSettleSeconds} s`, full: `${results.full.parked.gcSettleSeconds} s` });
rows.push({ measure: `${PARKED} parked pops, steady`, empty: cpu(results.empty.parked), full: cpu(results.full.parked) });
const wake = (w) => `p50 ${w.p50Ms} p99 ${w.p99Ms} ms (n ${w.n}${w.failures.length ? `, ${w.failures.length} failed` : ''})`;
rows.push({ measure: 'wake of a parked pop', empty: wake(results.empty.parked.wake), full: wake(results.full.parked.wake) });
rows.push({ measure: 'broker RSS MB parked', empty: results.empty.parked.brokerRssMb, full: results.full.parked.brokerRssMb });
const grown = (p) => `${Math.round((p.brokerRssMb - p.brokerRssBeforeMb) * 10) / 10} MB (${p.brokerRssBeforeMb} -> ${p.brokerRssMb})`;
rows.push({ measure: `RSS grown by ${PARKED} parked pops: broker / bare node:http`, empty: `${grown(results.empty.parked)} / ${grown(results.floorParked)}`, full: grown(results.full.parked) });
const pass = (p) => `${p.ms} ms (cpu broker ${p.brokerCpuMs} pg ${p.postgresCpuMs} ms)`;
for (const task of Object.keys(results.full.maintenance.idle)) {
  rows.push({ measure: `pass ${task}, nothing to delete`, empty: pass(results.empty.maintenance.idle[task]), full: pass(results.full.maintenance.idle[task]), 'full/empty': ratio(results.empty.maintenance.idle[task].ms, results.full.maintenance.idle[task].ms) });
}
rows.push({ measure: 'partitions under retention', empty: results.empty.maintenance.retainedPartitions, full: results.full.maintenance.retainedPartitions });
for (const task of ['retention', 'partitions']) {
  const e = results.empty.maintenance.deleting[task];
  const f = results.full.maintenance.deleting[task];
  const what = (p) => JSON.stringify(task === 'retention' ? p.result.retention : p.result.partitions);
  rows.push({ measure: `pass ${task}, deleting`, empty: `${pass(e)} ${what(e)}`, full: `${pass(f)} ${what(f)}`, 'full/empty': ratio(e.ms, f.ms) });
}
results.table = rows;
const file = await writeResults(NAME, results);
console.log(table(['measure', 'empty', 'full', 'full/empty'], rows));
progress(NAME, `wrote ${file}`);
