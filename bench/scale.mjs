#!/usr/bin/env node
// Flat at scale (issue 31): what a push, a pop+ack, a wildcard pop, /metrics
// and the listings cost on a fresh database, and again after it holds
// QUEUES queues x 10 partitions with pending messages plus one queue of
// BIG partitions where one holds a message. One broker, one run.
//   node bench/scale.mjs [--queues 10000] [--big 50000] [--seconds 3]
//   npm run bench -- scale --queues 2000
// Writes bench/results/scale.json.
import { parseArgs } from 'node:util';
import pg from 'pg';
import { loadNow, measure, mb, percentile, progress, resultsHead, rssOf, spawnBroker, startDatabase, table, writeResults } from './_lib.mjs';

const NAME = 'scale';
const { values: args } = parseArgs({
  options: { queues: { type: 'string', default: '10000' }, big: { type: 'string', default: '50000' }, seconds: { type: 'string', default: '3' } },
});
const QUEUES = Number(args.queues);
const BIG = Number(args.big);
const SECONDS = Number(args.seconds);
const PARTITIONS = 10;
const SEED_BATCH = 500;
const GROUP = '__QUEUE_MODE__';

const loadAtStart = loadNow();
const db = await startDatabase(NAME);
const broker = await spawnBroker(NAME, db.url);
const sql = new pg.Pool({ connectionString: db.url, max: 2 });

async function call(method, path, body) {
  const res = await fetch(`${broker.url}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status >= 400) throw new Error(`${method} ${path}: ${res.status} ${text.slice(0, 300)}`);
  return { status: res.status, text, json: () => (text ? JSON.parse(text) : null) };
}
const push = (items) => call('POST', '/api/v1/push', { items });
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
/** One pop (no waiting) and the ack of what it got: the messages it moved. */
async function popAck(path) {
  const r = await call('GET', `${path}${path.includes('?') ? '&' : '?'}wait=false`);
  if (r.status !== 200) return 0;
  const { messages } = r.json();
  if (messages.length) await ackAll(messages);
  return messages.length;
}
/** p50/p99 of `n` timed calls of `fn` (ms): its whole call, or the milliseconds it answers. */
async function timed(n, fn) {
  const ms = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    const own = await fn(i);
    ms.push(typeof own === 'number' ? own : performance.now() - t);
  }
  ms.sort((a, b) => a - b);
  const r = (v) => Math.round(v * 100) / 100;
  return { n, p50Ms: r(percentile(ms, 50)), p99Ms: r(percentile(ms, 99)) };
}

/** One round of every measurement; `tag` names the queues it creates. */
async function round(tag, { bigQueue = null, someQueue = null } = {}) {
  const out = {};
  const hot = `hot-${tag}`;
  progress(NAME, `[${tag}] push b100 / b1 to one partition`);
  const b100 = Array.from({ length: 100 }, (_, i) => ({ queue: hot, partition: 'p', payload: { i } }));
  out.pushB100 = await measure({ workers: 1, seconds: SECONDS, step: async () => (await push(b100), 100) });
  out.pushB1 = await measure({ workers: 1, seconds: SECONDS, step: async () => (await push([{ queue: hot, partition: 'p', payload: 1 }]), 1) });
  progress(NAME, `[${tag}] pop+ack batch 10 on that partition`);
  out.popAckB10 = await measure({ workers: 1, seconds: SECONDS, step: () => popAck(`/api/v1/pop/queue/${hot}/partition/p?batch=10`) });

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
    out.wildcardPopAckBig = await timed(20, async (i) => {
      await push([{ queue: bigQueue, partition: `p${i % 7}`, payload: i }]);
      const t = performance.now();
      const moved = await popAck(`/api/v1/pop/queue/${bigQueue}?batch=1`);
      if (moved !== 1) throw new Error(`wildcard pop on ${bigQueue} moved ${moved}`);
      return performance.now() - t;
    });
  }

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
  return { seconds: Math.round((Date.now() - started) / 100) / 10, bigQueue: big };
}

let results;
try {
  const empty = await round('empty');
  progress(NAME, `seeding ${QUEUES} queues x ${PARTITIONS} partitions and one queue of ${BIG}`);
  const seeded = await seed();
  const counts = (await sql.query(`select (select count(*) from queen.queues)::int as queues, (select count(*) from queen.partitions)::int as partitions`)).rows[0];
  progress(NAME, `seeded in ${seeded.seconds}s: ${JSON.stringify(counts)}`);
  const full = await round('full', { bigQueue: seeded.bigQueue, someQueue: 'q0' });
  results = { ...resultsHead(NAME, db, loadAtStart), options: { queues: QUEUES, partitionsPerQueue: PARTITIONS, bigQueuePartitions: BIG, seconds: SECONDS }, seedSeconds: seeded.seconds, counts, empty, full };
} finally {
  await sql.end();
  await broker.stop();
  await db.stop();
}

const rows = [];
const ratio = (a, b) => (a && b ? Math.round((b / a) * 100) / 100 : null);
for (const k of ['pushB100', 'pushB1', 'popAckB10']) {
  const e = results.empty[k];
  const f = results.full[k];
  rows.push({ measure: k, empty: `${e.msgPerSec} msg/s p50 ${e.p50Ms} p99 ${e.p99Ms}`, full: `${f.msgPerSec} msg/s p50 ${f.p50Ms} p99 ${f.p99Ms}`, 'full/empty': ratio(e.msgPerSec, f.msgPerSec) });
}
for (const k of ['wildcardPopAck10', 'wildcardPopAckBig']) {
  const e = results.empty[k];
  const f = results.full[k];
  rows.push({ measure: k, empty: e ? `p50 ${e.p50Ms} p99 ${e.p99Ms} ms` : '', full: f ? `p50 ${f.p50Ms} p99 ${f.p99Ms} ms` : '' });
}
rows.push({ measure: 'metrics', empty: `${results.empty.metrics.bytes} B p50 ${results.empty.metrics.p50Ms} ms`, full: `${results.full.metrics.bytes} B p50 ${results.full.metrics.p50Ms} ms` });
for (const k of Object.keys(results.full.listings)) {
  const e = results.empty.listings[k];
  const f = results.full.listings[k];
  const show = (x) => (x.error ? `error: ${x.error.slice(0, 40)}` : `p50 ${x.p50Ms} ms, ${x.bytes} B`);
  rows.push({ measure: `list ${k}`, empty: show(e), full: show(f) });
}
rows.push({ measure: 'broker RSS MB', empty: results.empty.brokerRssMb, full: results.full.brokerRssMb });
results.table = rows;
const file = await writeResults(NAME, results);
console.log(table(['measure', 'empty', 'full', 'full/empty'], rows));
progress(NAME, `wrote ${file}`);
