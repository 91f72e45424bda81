// Streams benchmark. Writes bench/results/streams.json and prints what it measured.
//   (1) one stream runner (a child process, so its RSS is its own): a tumbling
//       aggregate over 8 source partitions, batch 500, msg/s — against a raw-SQL
//       ceiling doing the same work through `pg` on the same database: pop
//       (queen.log_pop_v1), state read + upserts/deletes + sink pushes + ack
//       (queen.log_streams_cycle_v1, which upserts queen_streams.state and calls
//       queen.log_push_one_v1), one transaction per batch. Targets: ratio ≥ 50%,
//       runner RSS ≤ 120 MB.
//   (2) a gate that always allows vs a stateless map chain on the same data,
//       both pushing every message to a sink. Target: ratio ≥ 70%.
// Every path reads the same pre-pushed messages through its own consumer group.
// Runs against the built dist/ packages (`npm run build` first). Knobs:
// BENCH_PER_PARTITION (messages per source partition, 10000), BENCH_GATE_MESSAGES
// (messages read by each run of (2), 6000), DATABASE_URL
// (else an embedded PostgreSQL).
import { spawn } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

const NAME = 'streams';
const PARTITIONS = 8;
const BATCH = 500;
const PER_PARTITION = Number(process.env.BENCH_PER_PARTITION ?? 10000);
const TOTAL = PARTITIONS * PER_PARTITION;
const GATE_MESSAGES = Math.min(TOTAL, Number(process.env.BENCH_GATE_MESSAGES ?? 6000));
const WINDOW_SECONDS = 1;
const SOURCE = 'bench.src';
const SEP = '\u001f';

/** ~60 bytes of JSON: an order-like event. */
const payload = (i) => ({ n: i, amount: (i % 50) + 1, customer: `c-${i % 97}` });

if (process.argv[2] === '--child') await child(JSON.parse(process.argv[3]));
else await main();

// ---------------------------------------------------------------------------
// Child: one stream runner, alone in its process. Prints one JSON line.
async function child(spec) {
  const { Queen, Stream } = await import('queen-mq');
  const queen = new Queen({ url: spec.url });
  let s = Stream.from(queen.queue(SOURCE));
  if (spec.kind === 'tumbling') s = s.windowTumbling({ seconds: WINDOW_SECONDS }).aggregate({ count: () => 1, sum: (m) => m.amount });
  else if (spec.kind === 'gate') s = s.gate(() => true);
  else if (spec.kind === 'map') s = s.map((m) => m.data);
  else throw new Error(`unknown kind ${spec.kind}`);
  const errors = [];
  const handle = await s.to(queen.queue(spec.sink)).run({
    queryId: spec.queryId,
    url: spec.url,
    batchSize: BATCH,
    maxPartitions: PARTITIONS,
    maxWaitMillis: 200,
    onError: (e, info) => errors.push(`${info.phase}: ${e.message}`),
  });
  const started = performance.now();
  // Steady state: from the first commit on (startup, first connections and JIT excluded).
  let firstCommitAt = null;
  let firstCommitMessages = 0;
  let lastCommitAt = null;
  handle.on('cycle:commit', (c) => {
    const now = performance.now();
    if (firstCommitAt === null) {
      firstCommitAt = now;
      firstCommitMessages = handle.metrics().messagesTotal;
    }
    lastCommitAt = now;
  });
  const deadline = Date.now() + 150_000;
  while (handle.metrics().messagesTotal < spec.total && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  const seconds = (performance.now() - started) / 1000;
  const m = handle.metrics();
  await handle.stop();
  await queen.close();
  const steadySeconds = lastCommitAt !== null && lastCommitAt > firstCommitAt ? (lastCommitAt - firstCommitAt) / 1000 : null;
  const steadyMessages = m.messagesTotal - firstCommitMessages;
  process.stdout.write(`${JSON.stringify({ messages: m.messagesTotal, seconds, steadyMessages, steadySeconds, cycles: m.cyclesTotal, errors: errors.slice(0, 5), errorCount: errors.length })}\n`);
  process.exit(0);
}

// ---------------------------------------------------------------------------
async function main() {
  const { loadNow, mb, progress, resultsHead, rssSampler, spawnBroker, startDatabase, table, writeResults } = await import('./_lib.mjs');
  const started = Date.now();
  const loadAtStart = loadNow();
  const db = await startDatabase(NAME);
  const broker = await spawnBroker(NAME, db.url);
  const sql = new pg.Pool({ connectionString: db.url, max: 4 });

  async function http(method, path, body) {
    const res = await fetch(`${broker.url}${path}`, { method, headers: body ? { 'content-type': 'application/json' } : {}, body: body ? JSON.stringify(body) : undefined });
    const text = await res.text();
    if (res.status >= 300) throw new Error(`${method} ${path} → ${res.status}: ${text.slice(0, 300)}`);
    return text ? JSON.parse(text) : null;
  }

  // Source data: PER_PARTITION messages on each of 8 partitions, pushed once.
  progress(NAME, `pushing ${TOTAL} messages to ${PARTITIONS} partitions`);
  await http('POST', '/api/v1/configure', { queue: SOURCE, options: { leaseTime: 30 } });
  for (let from = 0; from < PER_PARTITION; from += 250) {
    const items = [];
    for (let p = 0; p < PARTITIONS; p++) for (let i = from; i < Math.min(PER_PARTITION, from + 250); i++) items.push({ queue: SOURCE, partition: `p${p}`, payload: payload(i) });
    await http('POST', '/api/v1/push', { items });
  }

  // A stream runner in a child process; RSS sampled from /proc by this process.
  async function runChild(kind, label, total, round) {
    const queryId = `bench.${kind}.${round}`;
    const sink = `bench.sink.${kind}`;
    progress(NAME, `${label} #${round}: runner child (${kind})`);
    const proc = spawn(process.execPath, [fileURLToPath(import.meta.url), '--child', JSON.stringify({ kind, queryId, sink, url: broker.url, total })], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const rss = rssSampler(proc.pid, 100);
    let out = '';
    proc.stdout.on('data', (d) => (out += d));
    const code = await new Promise((r) => proc.once('exit', r));
    const r = await rss.stop();
    if (code !== 0) throw new Error(`${label} child exited ${code}: ${out}`);
    const res = JSON.parse(out.trim().split('\n').pop());
    if (res.messages < total) throw new Error(`${label}: only ${res.messages}/${total} messages in time (${res.errors.join('; ')})`);
    return {
      path: label,
      round,
      messages: res.messages,
      seconds: Math.round(res.seconds * 100) / 100,
      msgPerSec: Math.round(res.messages / res.seconds),
      steadyMsgPerSec: res.steadySeconds ? Math.round(res.steadyMessages / res.steadySeconds) : null,
      cycles: res.cycles,
      errors: res.errorCount,
      rssPeakMB: mb(r.peakBytes),
    };
  }

  // The raw-SQL ceiling of (1): the same fold, one transaction per popped batch.
  async function sqlCeiling(round) {
    const label = 'raw SQL (pg)';
    progress(NAME, `${label} #${round}: pop + state + push + ack per transaction`);
    const reg = await http('POST', '/streams/v1/queries', { name: `bench.ceiling.${round}`, source_queue: SOURCE, sink_queue: 'bench.sink.ceiling', config_hash: 'ceiling', reset: true });
    const queryId = reg.query_id;
    await sql.query('select * from queen.ensure_partitions_v1($1::jsonb)', [JSON.stringify(Array.from({ length: PARTITIONS }, (_, p) => ({ queue: 'bench.sink.ceiling', partition: `p${p}` })))]);
    const { rows: q } = await sql.query('select id from queen.queues where name = $1', [SOURCE]);
    const queueId = q[0].id;
    const group = `bench.ceiling.${round}`;
    const client = await sql.connect();
    let messages = 0;
    let cycles = 0;
    let firstCommitAt = null;
    let firstCommitMessages = 0;
    let lastCommitAt = null;
    const t0 = performance.now();
    try {
      for (;;) {
        await client.query('begin');
        const leaseId = randomUUID();
        const { rows } = await client.query('select * from queen.log_pop_v1($1, null, $2, $3, $4, false, $5)', [queueId, group, BATCH, PARTITIONS, leaseId]);
        const popped = rows.filter((r) => r.msg_offset !== null);
        if (popped.length === 0) {
          await client.query('commit');
          break;
        }
        const byPartition = new Map();
        for (const r of popped) {
          let b = byPartition.get(r.partition_id);
          if (!b) byPartition.set(r.partition_id, (b = { name: r.partition_name, msgs: [] }));
          b.msgs.push(r);
        }
        const { rows: stored } = await client.query(
          'select partition_id, key, value, version from queen_streams.state where query_id = $1 and partition_id = any($2::uuid[])',
          [queryId, [...byPartition.keys()]],
        );
        const elements = [];
        for (const [pid, b] of byPartition) {
          const windows = new Map();
          for (const s of stored) if (s.partition_id === pid) windows.set(s.key, { ...s.value, version: Number(s.version) });
          let clock = 0;
          for (const m of b.msgs) {
            const ts = Date.parse(m.created_at);
            clock = Math.max(clock, ts);
            const start = Math.floor(ts / (WINDOW_SECONDS * 1000)) * WINDOW_SECONDS * 1000;
            const key = `tumb:${WINDOW_SECONDS}${SEP}${new Date(start).toISOString()}${SEP}${pid}`;
            let w = windows.get(key);
            if (!w) windows.set(key, (w = { acc: { count: 0, sum: 0 }, windowStart: start, windowEnd: start + WINDOW_SECONDS * 1000, version: 0 }));
            w.acc.count += 1;
            w.acc.sum += m.payload.amount;
            w.dirty = true;
          }
          const stateOps = [];
          const pushItems = [];
          for (const [key, w] of windows) {
            if (w.windowEnd <= clock) {
              if (w.version) stateOps.push({ type: 'delete', key, expected_version: w.version });
              const tx = `sx-${createHash('sha256').update(`${queryId}${SEP}${pid}${SEP}${key}${SEP}0`).digest('hex').slice(0, 40)}`;
              pushItems.push({ queue: 'bench.sink.ceiling', partition: b.name, payload: w.acc, transactionId: tx });
            } else if (w.dirty) {
              stateOps.push({ type: 'upsert', key, value: { acc: w.acc, windowStart: w.windowStart, windowEnd: w.windowEnd }, expected_version: w.version });
            }
          }
          const last = b.msgs[b.msgs.length - 1];
          elements.push({ idx: elements.length, query_id: queryId, partition_id: pid, consumer_group: group, state_ops: stateOps, push_items: pushItems, ack: { transactionId: last.transaction_id, leaseId, status: 'completed' }, release_lease: true });
        }
        const { rows: res } = await client.query('select queen.log_streams_cycle_v1($1::jsonb) as r', [JSON.stringify(elements)]);
        for (const e of res[0].r) if (!e.result.success) throw new Error(`ceiling cycle failed: ${e.result.code} ${e.result.error}`);
        await client.query('commit');
        messages += popped.length;
        cycles += elements.length;
        lastCommitAt = performance.now();
        if (firstCommitAt === null) {
          firstCommitAt = lastCommitAt;
          firstCommitMessages = messages;
        }
      }
    } catch (err) {
      await client.query('rollback').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
    const seconds = (performance.now() - t0) / 1000;
    if (messages !== TOTAL) throw new Error(`ceiling moved ${messages}/${TOTAL} messages`);
    const steadySeconds = (lastCommitAt - firstCommitAt) / 1000;
    return {
      path: label,
      round,
      messages,
      seconds: Math.round(seconds * 100) / 100,
      msgPerSec: Math.round(messages / seconds),
      steadyMsgPerSec: steadySeconds > 0 ? Math.round((messages - firstCommitMessages) / steadySeconds) : null,
      cycles,
      errors: 0,
      rssPeakMB: null,
    };
  }

  // Broker-side time per route while the tumbling runner ran (from its own histogram):
  // where a runner cycle's wall time goes, next to the runner's total.
  async function routeTimes() {
    const text = await (await fetch(`${broker.url}/metrics`)).text();
    const out = {};
    for (const line of text.split('\n')) {
      const m = /^queen_http_request_duration_seconds_(sum|count)\{route="([^"]+)"\} (\S+)$/.exec(line);
      if (m) (out[m[2]] ??= { sum: 0, count: 0 })[m[1]] = Number(m[3]);
    }
    return out;
  }
  const before = await routeTimes();
  const tumbling1 = await runChild('tumbling', 'runner: tumbling aggregate', TOTAL, 1);
  const after = await routeTimes();
  const brokerTime = Object.entries(after)
    .map(([route, a]) => ({ route, requests: a.count - (before[route]?.count ?? 0), seconds: Math.round((a.sum - (before[route]?.sum ?? 0)) * 100) / 100 }))
    .filter((r) => r.requests > 0 && r.route !== '/metrics')
    .map((r) => ({ ...r, msPerRequest: Math.round((r.seconds / r.requests) * 1000 * 10) / 10 }));
  // The machine is shared: each side runs twice, alternating, and the best
  // steady rate of each side is compared (noise only ever slows a run down).
  const ceiling1 = await sqlCeiling(1);
  const tumbling2 = await runChild('tumbling', 'runner: tumbling aggregate', TOTAL, 2);
  const ceiling2 = await sqlCeiling(2);
  // (2) reads the first GATE_MESSAGES of the same source (each its own group):
  // every message becomes a sink push there, so the whole source would be slow.
  const gate1 = await runChild('gate', 'runner: gate (always allow)', GATE_MESSAGES, 1);
  const map1 = await runChild('map', 'runner: stateless map', GATE_MESSAGES, 1);
  const gate2 = await runChild('gate', 'runner: gate (always allow)', GATE_MESSAGES, 2);
  const map2 = await runChild('map', 'runner: stateless map', GATE_MESSAGES, 2);
  const best = (a, b) => (b.steadyMsgPerSec > a.steadyMsgPerSec ? b : a);
  const tumbling = best(tumbling1, tumbling2);
  const ceiling = best(ceiling1, ceiling2);
  const gate = best(gate1, gate2);
  const map = best(map1, map2);

  // Cross-checks: every path emitted what it should (a fast wrong answer is no answer).
  const count = async (queue) => Number((await sql.query('select count(*) from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1', [queue])).rows[0].count);
  const sinkCounts = { tumbling: await count('bench.sink.tumbling'), ceiling: await count('bench.sink.ceiling'), gate: await count('bench.sink.gate'), map: await count('bench.sink.map') };
  if (sinkCounts.gate < 2 * GATE_MESSAGES || sinkCounts.map < 2 * GATE_MESSAGES || sinkCounts.tumbling < 1 || sinkCounts.ceiling < 1) throw new Error(`sink counts off: ${JSON.stringify(sinkCounts)}`);

  const rssPeak = Math.max(tumbling1.rssPeakMB, tumbling2.rssPeakMB);
  const pct = (a, b) => Math.round((a / b) * 1000) / 10;
  // Ratios on the steady-state rates (first commit to last), overall rates alongside.
  const tumblingRatio = pct(tumbling.steadyMsgPerSec, ceiling.steadyMsgPerSec);
  const gateRatio = pct(gate.steadyMsgPerSec, map.steadyMsgPerSec);
  const summary = [
    { measure: 'tumbling runner / raw-SQL ceiling (steady)', value: `${tumblingRatio}%`, target: '≥ 50%', met: tumblingRatio >= 50 ? 'yes' : 'NO' },
    { measure: 'tumbling runner / raw-SQL ceiling (overall)', value: `${pct(Math.max(tumbling1.msgPerSec, tumbling2.msgPerSec), Math.max(ceiling1.msgPerSec, ceiling2.msgPerSec))}%`, target: '', met: '' },
    { measure: 'tumbling runner RSS peak', value: `${rssPeak} MB`, target: '≤ 120 MB', met: rssPeak <= 120 ? 'yes' : 'NO' },
    { measure: 'gate (allow) / stateless map (steady)', value: `${gateRatio}%`, target: '≥ 70%', met: gateRatio >= 70 ? 'yes' : 'NO' },
    { measure: 'gate (allow) / stateless map (overall)', value: `${pct(Math.max(gate1.msgPerSec, gate2.msgPerSec), Math.max(map1.msgPerSec, map2.msgPerSec))}%`, target: '', met: '' },
  ];
  const rows = [tumbling1, tumbling2, ceiling1, ceiling2, gate1, gate2, map1, map2];
  await broker.stop();
  await sql.end();
  await db.stop();

  const results = {
    ...resultsHead(NAME, db, loadAtStart),
    settings: { partitions: PARTITIONS, perPartition: PER_PARTITION, messages: TOTAL, gateMessages: GATE_MESSAGES, batchSize: BATCH, maxPartitions: PARTITIONS, windowSeconds: WINDOW_SECONDS, payloadBytes: JSON.stringify(payload(1)).length },
    notes: [
      'Every run reads the same pre-pushed messages (8 partitions) through its own consumer group from the start: (1) all of them, (2) the first gateMessages. Each path runs twice, alternating with its counterpart (the machine is shared), and the summary compares the best steady rate of each path. msgPerSec = source messages acked / seconds from start to the last ack; steadyMsgPerSec = messages acked after the first commit / seconds from the first commit to the last (startup, first connections and JIT excluded). Ratios use the steady rates.',
      'runner paths: queen-mq from dist/ in a child process (RSS sampled from /proc every 100 ms), batchSize 500, maxPartitions 8, against apps/broker/dist/main.js in another child process.',
      'raw SQL: one pg connection; per popped batch one transaction: queen.log_pop_v1 (batch 500, 8 partitions), one select of the state rows, the same tumbling fold in JS, one queen.log_streams_cycle_v1 call carrying every partition element (state upserts/deletes into queen_streams.state, sink pushes through queen.log_push_one_v1, the ack). No HTTP, no per-partition round trips: the ceiling.',
      'gate vs map: `.gate(() => true)` (a state read and one state upsert per partition per cycle) against `.map(m => m.data)` (no state), both pushing every message to a sink.',
    ],
    summary,
    rows,
    sinkMessages: sinkCounts,
    tumblingBrokerTime: brokerTime,
    seconds: Math.round((Date.now() - started) / 1000),
  };
  const file = await writeResults(NAME, results);
  console.log(`\nQueen streams benchmark (${TOTAL} messages over ${PARTITIONS} partitions, batch ${BATCH}, PostgreSQL ${db.settings.server_version}${db.embedded ? ' embedded' : ''}, fsync=${db.settings.fsync}, load ${loadAtStart})\n`);
  console.log(table(['path', 'round', 'messages', 'seconds', 'msgPerSec', 'steadyMsgPerSec', 'cycles', 'errors', 'rssPeakMB'], rows));
  console.log('');
  console.log(table(['measure', 'value', 'target', 'met'], summary));
  console.log(`\nbroker-side time per route during tumbling run #1 (runner wall time ${tumbling1.seconds}s):`);
  console.log(table(['route', 'requests', 'seconds', 'msPerRequest'], brokerTime));
  console.log(`\nsink messages: ${JSON.stringify(sinkCounts)}; took ${results.seconds}s`);
  console.log(`results: ${file}`);
}
