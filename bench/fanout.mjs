// Fan-out benchmark: one queue with 8 partitions holding N messages, consumed
// (pop batch 500 + one ack batch per pop) by 1 consumer group, then by 4
// consumer groups at once on the same messages. Every group reads the whole
// log on its own cursor, so 4 groups deliver 4×N: the ratio of deliveries/s
// (4 groups ÷ 1 group) says how much of the fan-out is free (4 = perfect,
// 1 = the groups only share the same throughput). Writes
// bench/results/fanout.json. Knobs: BENCH_FANOUT_MESSAGES (100000),
// BENCH_FANOUT_WORKERS (poppers per group, 2), DATABASE_URL (else embedded).
import { Pool } from 'undici';
import { loadNow, mb, percentile, progress, resultsHead, rssSampler, spawnBroker, startDatabase, table, writeResults } from './_lib.mjs';

const NAME = 'fanout';
const MESSAGES = Number(process.env.BENCH_FANOUT_MESSAGES ?? 100_000);
const WORKERS_PER_GROUP = Number(process.env.BENCH_FANOUT_WORKERS ?? 2);
const PARTITIONS = 8;
const POP_BATCH = 500;
const PUSH_BATCH = 1000;
const PUSH_CONNECTIONS = 4;
const QUEUE = 'bench-fanout';
/** A phase that has not drained its groups by then is reported as incomplete, not waited for. */
const PHASE_LIMIT_MS = 60_000;

/** ~110 bytes of JSON, as in bench/broker.mjs. */
const payload = (i) => ({ n: i, kind: 'bench.event', customer: `c-${i % 97}`, note: 'x'.repeat(48) });

const loadAtStart = loadNow();
const db = await startDatabase(NAME);
const broker = await spawnBroker(NAME, db.url);
const rss = rssSampler(broker.pid);
const http = new Pool(broker.url, { connections: Math.max(PUSH_CONNECTIONS, 4 * WORKERS_PER_GROUP), pipelining: 1 });

async function call(method, path, body, expect) {
  const res = await http.request({ method, path, headers: body ? { 'content-type': 'application/json' } : {}, body });
  const text = await res.body.text();
  if (!expect.includes(res.statusCode)) throw new Error(`${method} ${path} answered ${res.statusCode}: ${text.slice(0, 300)}`);
  return { status: res.statusCode, text };
}

// --- fill: N messages over 8 partitions --------------------------------------
await rss.mark('push');
const batches = Math.ceil(MESSAGES / PUSH_BATCH);
let nextBatch = 0;
const pushStart = performance.now();
await Promise.all(Array.from({ length: PUSH_CONNECTIONS }, async () => {
  for (let b = nextBatch++; b < batches; b = nextBatch++) {
    const size = Math.min(PUSH_BATCH, MESSAGES - b * PUSH_BATCH);
    const items = Array.from({ length: size }, (_, i) => ({ queue: QUEUE, partition: `p${(b * PUSH_BATCH + i) % PARTITIONS}`, payload: payload(b * PUSH_BATCH + i) }));
    await call('POST', '/api/v1/push', JSON.stringify({ items }), [201]);
  }
}));
const pushSeconds = (performance.now() - pushStart) / 1000;
progress(NAME, `pushed ${MESSAGES} messages to ${PARTITIONS} partitions in ${pushSeconds.toFixed(1)} s (${Math.round(MESSAGES / pushSeconds)} msg/s)`);

/**
 * Each group drains the whole queue with WORKERS_PER_GROUP poppers: pop up to
 * 500 (one partition per pop), ack them in one batch. A 204 while the group is
 * not done means every partition with messages is leased by a sibling: retry
 * shortly. Answers deliveries (acked messages) per group and the elapsed time.
 */
async function consume(phase, groups) {
  await rss.mark(phase);
  const delivered = new Map(groups.map((g) => [g, 0]));
  const latencies = [];
  let empties = 0;
  const deadline = Date.now() + PHASE_LIMIT_MS;
  const started = performance.now();
  await Promise.all(groups.flatMap((group) => Array.from({ length: WORKERS_PER_GROUP }, async () => {
    while (delivered.get(group) < MESSAGES && Date.now() < deadline) {
      const t0 = performance.now();
      const popped = await call('GET', `/api/v1/pop/queue/${QUEUE}?batch=${POP_BATCH}&consumerGroup=${group}`, undefined, [200, 204]);
      if (popped.status === 204) {
        empties++;
        await new Promise((r) => setTimeout(r, 5));
        continue;
      }
      const { messages } = JSON.parse(popped.text);
      const acknowledgments = messages.map((m) => ({ transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId }));
      const acked = await call('POST', '/api/v1/ack/batch', JSON.stringify({ consumerGroup: group, acknowledgments }), [200]);
      if (!JSON.parse(acked.text).every((r) => r.success)) throw new Error(`ack refused: ${acked.text.slice(0, 300)}`);
      delivered.set(group, delivered.get(group) + messages.length);
      latencies.push(performance.now() - t0);
    }
  })));
  const seconds = (performance.now() - started) / 1000;
  const total = [...delivered.values()].reduce((a, b) => a + b, 0);
  latencies.sort((a, b) => a - b);
  const round = (v) => (v == null ? null : Math.round(v * 100) / 100);
  const complete = [...delivered.values()].every((n) => n >= MESSAGES);
  const result = {
    phase,
    groups: groups.length,
    workersPerGroup: WORKERS_PER_GROUP,
    deliveries: total,
    complete,
    seconds: round(seconds),
    deliveriesPerSec: Math.round(total / seconds),
    popAckP50Ms: round(percentile(latencies, 50)),
    popAckP99Ms: round(percentile(latencies, 99)),
    emptyPops: empties,
    perGroup: Object.fromEntries(delivered),
  };
  progress(NAME, `${phase}: ${total} deliveries in ${result.seconds} s = ${result.deliveriesPerSec}/s${complete ? '' : ' (INCOMPLETE: phase time limit)'}`);
  return result;
}

const one = await consume('1 group', ['fan-single']);
const four = await consume('4 groups', ['fan-a', 'fan-b', 'fan-c', 'fan-d']);
const ratio = Math.round((four.deliveriesPerSec / one.deliveriesPerSec) * 100) / 100;

await rss.mark('done');
const rssReport = await rss.stop();
await http.close();
await broker.stop();
await db.stop();
const results = {
  ...resultsHead(NAME, db, loadAtStart),
  settings: { messages: MESSAGES, partitions: PARTITIONS, popBatch: POP_BATCH, workersPerGroup: WORKERS_PER_GROUP, pushBatch: PUSH_BATCH, payloadBytes: JSON.stringify(payload(1)).length },
  notes: [
    'broker: HTTP over an undici Pool to apps/broker/dist/main.js in a child process.',
    'fill: the messages are pushed first (not timed with the consumers); each group then drains all of them from offset 1 (subscription mode all).',
    'a delivery = a message popped by a group and acked in that group (pop batch 500, one partition per pop, then one /ack/batch).',
    'ratio = 4-group deliveries/s ÷ 1-group deliveries/s: 4 would mean fan-out costs nothing extra; both phases share one broker and one PostgreSQL.',
  ],
  push: { seconds: Math.round(pushSeconds * 100) / 100, msgPerSec: Math.round(MESSAGES / pushSeconds) },
  phases: [one, four],
  ratio4to1: ratio,
  rss: { peakMB: mb(rssReport.peakBytes), phases: rssReport.phases.map((p) => ({ phase: p.phase, peakMB: mb(p.peakBytes) })) },
};
const file = await writeResults(NAME, results);

console.log(`\nQueen fan-out benchmark (${MESSAGES} messages, ${PARTITIONS} partitions, pop batch ${POP_BATCH}, ${WORKERS_PER_GROUP} poppers per group, PostgreSQL ${db.settings.server_version}${db.embedded ? ' embedded' : ''})\n`);
console.log(table(['phase', 'groups', 'deliveries', 'seconds', 'deliveries/s', 'p50 ms', 'p99 ms', 'complete'],
  [one, four].map((r) => ({ phase: r.phase, groups: r.groups, deliveries: r.deliveries, seconds: r.seconds, 'deliveries/s': r.deliveriesPerSec, 'p50 ms': r.popAckP50Ms, 'p99 ms': r.popAckP99Ms, complete: r.complete }))));
console.log(`\nratio 4-group ÷ 1-group deliveries/s: ${ratio}`);
console.log(`push: ${results.push.msgPerSec} msg/s; broker RSS peak ${results.rss.peakMB} MB`);
console.log(`results: ${file}`);
