// Window close latency: how soon after its end a window of a QUIET partition
// is emitted by the idle flush, per window kind at its default idleFlushMs
// (and tumbling at 500 ms). Processing time; each of N partitions gets one
// message, staggered so window ends fall at every phase of the flush tick.
// delay = createdAt of the emit on the sink − windowEnd (both broker clocks).
// Target: p99 ≤ idleFlushMs + 250 ms. Writes bench/results/windows.json.
// Knobs: BENCH_WINDOWS (50 per row), BENCH_KINDS (comma list), DATABASE_URL.
import { Queen, Stream, tumbling, sliding, session, cron } from 'queen-mq';
import { loadNow, percentile, progress, resultsHead, spawnBroker, startDatabase, table, writeResults } from './_lib.mjs';

const NAME = 'windows';
const WINDOWS = Number(process.env.BENCH_WINDOWS ?? 50);
const TARGET_SLACK_MS = 250;
const ALL_ROWS = [
  { kind: 'tumbling', plugin: () => tumbling({ seconds: 1 }), idleFlushMs: 5000 },
  { kind: 'tumbling', plugin: () => tumbling({ seconds: 1 }), idleFlushMs: 500 },
  { kind: 'sliding', plugin: () => sliding({ size: 2, slide: 1 }), idleFlushMs: 5000 },
  { kind: 'session', plugin: () => session({ gap: 1 }), idleFlushMs: 1000 },
  { kind: 'cron', plugin: () => cron({ every: 'second' }), idleFlushMs: 30000 },
];
const wantedKinds = process.env.BENCH_KINDS ? new Set(process.env.BENCH_KINDS.split(',')) : null;
const ROWS = ALL_ROWS.filter((r) => !wantedKinds || wantedKinds.has(r.kind));

const loadAtStart = loadNow();
const db = await startDatabase(NAME);
const broker = await spawnBroker(NAME, db.url);
const queen = new Queen({ url: broker.url });

async function http(method, path, body) {
  const res = await fetch(`${broker.url}${path}`, { method, headers: body ? { 'content-type': 'application/json' } : {}, body: body ? JSON.stringify(body) : undefined });
  const text = await res.text();
  if (res.status >= 300 && res.status !== 204) throw new Error(`${method} ${path} answered ${res.status}: ${text.slice(0, 300)}`);
  return res.status === 204 ? null : JSON.parse(text);
}

async function measureRow(row, index) {
  const src = `bench-win-${index}-src`;
  const sink = `bench-win-${index}-sink`;
  await http('POST', '/api/v1/configure', { queue: src, options: { leaseTime: 5, retryLimit: 100 } });
  const plugin = row.plugin();
  const perMessage = plugin.assign(0).length; // sliding: size/slide windows per message
  const expected = WINDOWS * perMessage;
  const handle = await Stream.from(queen.queue(src))
    .window(plugin, { idleFlushMs: row.idleFlushMs })
    .aggregate({ count: () => 1 })
    .map((agg, ctx) => ({ ...agg, windowEnd: ctx.windowEnd }))
    .to(queen.queue(sink))
    .run({ queryId: `bench-win-${index}`, url: broker.url, batchSize: 50, maxWaitMillis: 300, maxPartitions: 8 });
  // Stagger one message per partition across a full flush interval (at least 2 s).
  const spread = Math.max(2000, row.idleFlushMs);
  const started = Date.now();
  for (let i = 0; i < WINDOWS; i++) {
    const due = started + (i * spread) / WINDOWS;
    if (due > Date.now()) await new Promise((r) => setTimeout(r, due - Date.now()));
    await http('POST', '/api/v1/push', { items: [{ queue: src, partition: `p${i}`, payload: { i } }] });
  }
  const delays = [];
  const deadline = Date.now() + spread + row.idleFlushMs * 2 + 15000;
  while (delays.length < expected && Date.now() < deadline) {
    const pop = await http('GET', `/api/v1/pop/queue/${sink}?batch=500&wait=true&timeout=500&autoAck=true&partitions=100&consumerGroup=bench`);
    for (const m of pop?.messages ?? []) delays.push(Date.parse(m.createdAt) - m.data.windowEnd);
  }
  const metrics = handle.metrics();
  await handle.stop();
  delays.sort((a, b) => a - b);
  const p99 = percentile(delays, 99);
  const result = {
    kind: row.kind,
    idleFlushMs: row.idleFlushMs,
    windows: delays.length,
    expectedWindows: expected,
    p50Ms: percentile(delays, 50),
    p99Ms: p99,
    maxMs: delays.length ? delays[delays.length - 1] : null,
    minMs: delays.length ? delays[0] : null,
    targetMs: row.idleFlushMs + TARGET_SLACK_MS,
    meetsTarget: delays.length === expected && p99 !== null && p99 <= row.idleFlushMs + TARGET_SLACK_MS,
    flushCycles: metrics.flushCyclesTotal,
    errors: metrics.errorsTotal,
    delaysMs: delays,
  };
  progress(NAME, `${row.kind} idleFlushMs ${row.idleFlushMs}: ${delays.length}/${expected} windows, p50 ${result.p50Ms} ms, p99 ${p99} ms, max ${result.maxMs} ms (target ≤ ${result.targetMs})`);
  return result;
}

const rows = [];
try {
  for (const [i, row] of ROWS.entries()) rows.push(await measureRow(row, i));
} finally {
  await queen.close();
  await broker.stop();
  await db.stop();
}

const results = {
  ...resultsHead(NAME, db, loadAtStart),
  settings: { windowsPerRow: WINDOWS, targetSlackMs: TARGET_SLACK_MS },
  notes: [
    'Processing time: one message per partition, partitions staggered over max(2 s, idleFlushMs) so window ends fall at every phase of the flush tick.',
    'delay = the emit\'s createdAt on the sink − windowEnd (the broker stamps both clocks); the idle flush closes a window once the wall clock passes windowEnd and the partition is caught up (lag 0).',
    'Sessions are ripe only strictly past windowEnd (inclusive end); sliding counts size/slide windows per message.',
    'Runner and broker share a 2-core machine with the embedded PostgreSQL.',
  ],
  rows,
};
const file = await writeResults(NAME, results);
console.log(`\nQueen window close latency on quiet partitions (${WINDOWS} partitions per row)\n`);
console.log(table(['kind', 'idleFlushMs', 'windows', 'p50Ms', 'p99Ms', 'maxMs', 'targetMs', 'meetsTarget'], rows));
console.log(rows.map((r) => `${r.kind}/${r.idleFlushMs} top delays: ${r.delaysMs.slice(-5).join(', ')}`).join('\n'));
console.log(`results: ${file}`);
