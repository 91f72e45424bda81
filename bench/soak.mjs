// Soak (issue 13 item 3): does the broker leak under a steady mixed load?
// For SOAK_SECONDS (default 600) it keeps, against one broker (a child
// process, so its heap and RSS are its own):
//   - 200 long-poll pops parked on queues that never get a message (each
//     re-parks when its wait ends),
//   - a steady push/pop/ack load (batches of 10, rotating partition names, so
//     caches keyed by client-chosen names are exercised),
//   - a stream: queen-mq Stream with a 2 s tumbling window counting a steady
//     source into a sink queue,
// and samples the broker's heap (nodejs_heap_size_used_bytes on /metrics)
// and RSS (/proc) every SOAK_SAMPLE_MS (default 5000). Reports the least-
// squares slope (MB/min) of heap and RSS after a warm-up (the first fifth of
// the run, at least 20 s), and of their floor (least value of the last 30 s:
// garbage collection swings the raw series, a leak lifts the floor), writes
// bench/results/soak.json and prints a table.
// Knobs: SOAK_SECONDS, SOAK_SAMPLE_MS, SOAK_PARKED (200), DATABASE_URL.
import { Pool } from 'undici';
import { loadNow, mb, progress, resultsHead, rssOf, spawnBroker, startDatabase, table, writeResults } from './_lib.mjs';

const NAME = 'soak';
const SECONDS = Number(process.env.SOAK_SECONDS ?? 600);
const SAMPLE_MS = Number(process.env.SOAK_SAMPLE_MS ?? 5000);
const PARKED = Number(process.env.SOAK_PARKED ?? 200);
const WORK = 'soak.work';
const SOURCE = 'soak.src';
const SINK = 'soak.sink';
/** Distinct partition names the work load cycles through. */
const PARTITION_NAMES = 500;

const loadAtStart = loadNow();
const db = await startDatabase(NAME);
const broker = await spawnBroker(NAME, db.url, { QUEEN_RETENTION_INTERVAL_MS: '30000' });
const http = new Pool(broker.url, { connections: 16, pipelining: 1 });
const parkedHttp = new Pool(broker.url, { connections: PARKED + 8, pipelining: 1, headersTimeout: 0, bodyTimeout: 0 });
const stopAt = Date.now() + SECONDS * 1000;
const running = () => Date.now() < stopAt;
const counts = { pushed: 0, popped: 0, acked: 0, parkedAnswers: 0, streamPushed: 0, errors: 0 };
const errors = [];

async function call(pool, method, path, body) {
  const res = await pool.request({ method, path, headers: body ? { 'content-type': 'application/json' } : {}, body: body ? JSON.stringify(body) : undefined });
  const text = await res.body.text();
  if (res.statusCode >= 400) throw new Error(`${method} ${path.split('?')[0]} answered ${res.statusCode}: ${text.slice(0, 200)}`);
  return { status: res.statusCode, body: text ? JSON.parse(text) : undefined };
}

function noteError(err) {
  counts.errors++;
  if (errors.length < 10) errors.push(err.message);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Parked pops: queues nobody pushes to, so every pop waits its full timeout.
async function parkedLoop(i) {
  while (running()) {
    try {
      const r = await call(parkedHttp, 'GET', `/api/v1/pop/queue/soak.idle-${i}?wait=true&timeout=${Math.min(30000, Math.max(1000, stopAt - Date.now()))}`);
      if (r.status === 204) counts.parkedAnswers++;
    } catch (err) {
      noteError(err);
      await sleep(500);
    }
  }
}

let seq = 0;
async function producerLoop() {
  while (running()) {
    const partition = `p-${seq++ % PARTITION_NAMES}`;
    try {
      await call(http, 'POST', '/api/v1/push', { items: Array.from({ length: 10 }, (_, i) => ({ queue: WORK, partition, payload: { seq, i, note: 'x'.repeat(64) } })) });
      counts.pushed += 10;
    } catch (err) {
      noteError(err);
    }
    await sleep(10);
  }
}

async function consumerLoop() {
  while (running()) {
    try {
      const r = await call(http, 'GET', `/api/v1/pop/queue/${WORK}?batch=50&partitions=4&wait=true&timeout=1000`);
      if (r.status === 200) {
        const messages = r.body.messages;
        counts.popped += messages.length;
        const ack = await call(http, 'POST', '/api/v1/ack/batch', {
          acknowledgments: messages.map((m) => ({ transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId })),
        });
        counts.acked += ack.body.filter((x) => x.success).length;
      }
    } catch (err) {
      noteError(err);
      await sleep(200);
    }
  }
}

async function sourceLoop() {
  while (running()) {
    try {
      await call(http, 'POST', '/api/v1/push', { items: Array.from({ length: 20 }, (_, i) => ({ queue: SOURCE, partition: `s${i % 4}`, payload: { amount: i + 1 } })) });
      counts.streamPushed += 20;
    } catch (err) {
      noteError(err);
    }
    await sleep(50);
  }
}

const { Queen, Stream } = await import('queen-mq');
const queen = new Queen({ url: broker.url });
const stream = await Stream.from(queen.queue(SOURCE))
  .windowTumbling({ seconds: 2 })
  .aggregate({ count: () => 1, sum: (m) => m.amount })
  .to(queen.queue(SINK))
  .run({ queryId: 'soak.tumbling', url: broker.url, batchSize: 200, maxPartitions: 4, maxWaitMillis: 500, onError: (e) => noteError(e) });

// Samples: heap from the broker's own metrics, RSS from /proc.
const samples = [];
async function sample() {
  const t = (Date.now() - startedAt) / 60000;
  let heap = null;
  let parkedGauge = null;
  try {
    const text = await (await http.request({ method: 'GET', path: '/metrics' })).body.text();
    heap = Number(/^nodejs_heap_size_used_bytes (\S+)/m.exec(text)?.[1] ?? NaN);
    parkedGauge = Number(/^queen_long_poll_waiting\S* (\S+)/m.exec(text)?.[1] ?? NaN);
  } catch (err) {
    noteError(err);
  }
  const rss = await rssOf(broker.pid);
  samples.push({ minute: Math.round(t * 1000) / 1000, heapBytes: heap, rssBytes: rss, parked: Number.isNaN(parkedGauge) ? null : parkedGauge, ...counts });
}

/** Least-squares slope of y (bytes) over x (minutes), in MB/min. */
function slope(points) {
  const n = points.length;
  if (n < 2) return null;
  const mx = points.reduce((a, p) => a + p.x, 0) / n;
  const my = points.reduce((a, p) => a + p.y, 0) / n;
  const num = points.reduce((a, p) => a + (p.x - mx) * (p.y - my), 0);
  const den = points.reduce((a, p) => a + (p.x - mx) ** 2, 0);
  return den === 0 ? null : Math.round((num / den / 1048576) * 1000) / 1000;
}

progress(NAME, `${SECONDS}s: ${PARKED} parked pops, push/pop/ack on ${WORK}, a tumbling stream ${SOURCE} → ${SINK}; sampling every ${SAMPLE_MS} ms`);
const startedAt = Date.now();
const loops = [
  ...Array.from({ length: PARKED }, (_, i) => parkedLoop(i)),
  producerLoop(),
  producerLoop(),
  consumerLoop(),
  consumerLoop(),
  sourceLoop(),
];
await sample();
const sampler = setInterval(() => {
  void sample().then(() => {
    const s = samples.at(-1);
    progress(NAME, `t=${s.minute.toFixed(2)} min heap ${mb(s.heapBytes)} MB rss ${mb(s.rssBytes)} MB parked ${s.parked} pushed ${s.pushed} acked ${s.acked} errors ${s.errors}`);
  });
}, SAMPLE_MS);
await Promise.all(loops);
clearInterval(sampler);
await sample();
const streamMetrics = stream.metrics();
await stream.stop();
await queen.close();

/**
 * The floor of a sawtooth: each point replaced by the least value within
 * `minutes` before it. Garbage collection makes heap (and RSS) swing; a
 * leak lifts the floor, so its slope is the steadier measure.
 */
const floorOf = (points, minutes) => points.map((p) => ({ x: p.x, y: Math.min(...points.filter((q) => q.x <= p.x && q.x > p.x - minutes).map((q) => q.y)) }));

const warmupMinutes = Math.max(20, SECONDS / 5) / 60;
const steady = samples.filter((s) => s.minute >= warmupMinutes);
const heapPts = steady.filter((s) => Number.isFinite(s.heapBytes)).map((s) => ({ x: s.minute, y: s.heapBytes }));
const rssPts = steady.filter((s) => s.rssBytes !== null).map((s) => ({ x: s.minute, y: s.rssBytes }));
const sinkRows = await call(http, 'GET', `/api/v1/resources/queues/${SINK}`).then((r) => r.body.partitions.reduce((a, p) => a + Number(p.headOffset), 0)).catch(() => null);
const partitionsCreated = await call(http, 'GET', `/api/v1/resources/queues/${WORK}`).then((r) => r.body.partitionCount).catch(() => null);

const results = {
  ...resultsHead(NAME, db, loadAtStart),
  settings: { seconds: SECONDS, sampleMs: SAMPLE_MS, parked: PARKED, partitionNames: PARTITION_NAMES, warmupMinutes: Math.round(warmupMinutes * 100) / 100 },
  slopes: {
    heapMBPerMin: slope(heapPts),
    rssMBPerMin: slope(rssPts),
    heapFloorMBPerMin: slope(floorOf(heapPts, 0.5)),
    rssFloorMBPerMin: slope(floorOf(rssPts, 0.5)),
  },
  heap: { startMB: mb(steady[0]?.heapBytes), endMB: mb(steady.at(-1)?.heapBytes), peakMB: mb(Math.max(...heapPts.map((p) => p.y))) },
  rss: { startMB: mb(steady[0]?.rssBytes), endMB: mb(steady.at(-1)?.rssBytes), peakMB: mb(Math.max(...rssPts.map((p) => p.y))) },
  load: { ...counts, streamMessages: streamMetrics.messagesTotal, streamCycles: streamMetrics.cyclesTotal, sinkMessages: sinkRows, workPartitions: partitionsCreated },
  errors,
  samples: samples.map((s) => ({ minute: s.minute, heapMB: mb(s.heapBytes), rssMB: mb(s.rssBytes), parked: s.parked, pushed: s.pushed, acked: s.acked })),
};
const file = await writeResults(NAME, results);

await http.close();
await parkedHttp.close();
await broker.stop();
await db.stop();

console.log(`\nQueen soak: ${SECONDS}s, ${PARKED} parked pops, push/pop/ack and a tumbling stream (warm-up ${results.settings.warmupMinutes} min excluded)\n`);
console.log(table(['series', 'start MB', 'end MB', 'peak MB', 'slope MB/min', 'floor slope MB/min'], [
  { series: 'broker heap used', 'start MB': results.heap.startMB, 'end MB': results.heap.endMB, 'peak MB': results.heap.peakMB, 'slope MB/min': results.slopes.heapMBPerMin, 'floor slope MB/min': results.slopes.heapFloorMBPerMin },
  { series: 'broker RSS', 'start MB': results.rss.startMB, 'end MB': results.rss.endMB, 'peak MB': results.rss.peakMB, 'slope MB/min': results.slopes.rssMBPerMin, 'floor slope MB/min': results.slopes.rssFloorMBPerMin },
]));
console.log(`\nload: pushed ${counts.pushed}, popped ${counts.popped}, acked ${counts.acked}, parked answers ${counts.parkedAnswers}, stream source ${counts.streamPushed} → ${streamMetrics.messagesTotal} processed, ${sinkRows} sink messages, errors ${counts.errors}`);
if (errors.length) console.log(`first errors:\n  ${errors.join('\n  ')}`);
console.log(`results: ${file}`);
