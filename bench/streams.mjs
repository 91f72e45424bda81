// Streams benchmark. Writes bench/results/streams.json and prints what it measured.
// One stream runner (a child process, so its RSS is its own) against the broker
// (another child), batch 500, 8 source partitions, for
//   (a) a stateless map → queue sink (one output per input),
//   (b) a tumbling aggregate (few outputs),
// each against a plain-SQL cycle ceiling written without any SQL function of
// ours: per cycle one transaction taking an advisory lock, reading the cursor,
// 500 rows and the state rows, upserting/deleting state, allocating sink
// offsets (one head move) and inserting the outputs, advancing the cursor.
// Also (c) two runners of one query against one runner, (d) a gate that
// always allows against the map. Paths alternate, twice each; each summary
// ratio compares the best steady rate of each side (noise only slows a run).
// Each path also counts CPU (from /proc) of the runner process(es), the
// broker, PostgreSQL and this process over its steady window (first ack to
// last): cores busy = CPU seconds / wall seconds, the floor that says whether
// more runners can add throughput on this machine.
// Knobs: BENCH_PER_PARTITION (messages per source partition, 20000),
// DATABASE_URL (else an embedded PostgreSQL).
// Why 20000 (160k messages a path): at 5000 a round lasted 0.3–0.7 s, of
// which the fresh runner child's start and JIT warm-up were a large part, and
// three runs gave a tumbling ratio of 0.49, 0.44 and 0.46; at 20000 (2.4–4.5 s
// rounds) three runs gave 0.63, 0.68 and 0.65.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

const NAME = 'streams';
const PARTITIONS = 8;
const BATCH = 500;
const PER_PARTITION = Number(process.env.BENCH_PER_PARTITION ?? 20000);
const TOTAL = PARTITIONS * PER_PARTITION;
const WINDOW_SECONDS = 1;
const SOURCE = 'bench.src';
const SEP = '\u001f';
const CORES = cpus().length;

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
  // Window results sent by cycles and by the idle flush (the sink check needs one).
  let emitted = 0;
  handle.on('window:flush', (f) => (emitted += f.emits));
  handle.on('cycle:commit', (c) => {
    emitted += c.emits;
    const now = performance.now();
    if (firstCommitAt === null) {
      firstCommitAt = now;
      firstCommitMessages = handle.metrics().messagesTotal;
    }
    lastCommitAt = now;
  });
  const deadline = Date.now() + 150_000;
  // total 0: run until the parent says stop (it counts progress itself).
  let stopAsked = false;
  process.once('SIGTERM', () => (stopAsked = true));
  while ((spec.total ? handle.metrics().messagesTotal < spec.total : !stopAsked) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  const seconds = (performance.now() - started) / 1000;
  const m = handle.metrics();
  // The parent reads this process's CPU from /proc until it says stop.
  while (!stopAsked && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  // Processing-time windows close once the clock passes their end: a run
  // shorter than a window may have closed none, and then the idle flush
  // closes them. Wait for the first result (after the measured part) so the
  // sink is not counted before there is one.
  if (spec.kind === 'tumbling') while (emitted === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  await handle.stop();
  await queen.close();
  const steadySeconds = lastCommitAt !== null && lastCommitAt > firstCommitAt ? (lastCommitAt - firstCommitAt) / 1000 : null;
  const steadyMessages = m.messagesTotal - firstCommitMessages;
  process.stdout.write(`${JSON.stringify({ messages: m.messagesTotal, seconds, steadyMessages, steadySeconds, cycles: m.cyclesTotal, errors: errors.slice(0, 5), errorCount: errors.length })}\n`);
  process.exit(0);
}

// ---------------------------------------------------------------------------
async function main() {
  const { cpuSecondsOf, loadNow, mb, parentPidOf, postgresCpuSeconds, progress, resultsHead, rssSampler, spawnBroker, startDatabase, table, writeResults } = await import('./_lib.mjs');
  const started = Date.now();
  const loadAtStart = loadNow();
  const db = await startDatabase(NAME);
  const broker = await spawnBroker(NAME, db.url);
  const sql = new pg.Pool({ connectionString: db.url, max: 4 });
  const postmaster = parentPidOf((await sql.query('select pg_backend_pid() as pid')).rows[0].pid);

  // CPU seconds so far of each process in a path. A runner's last reading
  // stays once it exits (the parent stops runners only after its last sample).
  const runnerCpu = new Map();
  function cpuNow(runnerPids) {
    for (const pid of runnerPids) runnerCpu.set(pid, Math.max(runnerCpu.get(pid) ?? 0, cpuSecondsOf(pid)));
    const self = process.cpuUsage();
    return {
      at: performance.now(),
      runners: runnerPids.reduce((a, pid) => a + runnerCpu.get(pid), 0),
      broker: cpuSecondsOf(broker.pid),
      postgres: postgresCpuSeconds(postmaster),
      bench: (self.user + self.system) / 1e6,
      machine: machineBusySeconds(),
    };
  }
  /** CPU between two readings: seconds per process, cores busy, µs per message. */
  function cpuSplit(a, b, messages) {
    const wall = (b.at - a.at) / 1000;
    const d = (k) => b[k] - a[k];
    const total = d('runners') + d('broker') + d('postgres');
    const us = (k) => Math.round((d(k) * 1e6) / messages);
    return {
      wallSeconds: round2(wall), runnerCpuS: round2(d('runners')), brokerCpuS: round2(d('broker')), postgresCpuS: round2(d('postgres')), benchCpuS: round2(d('bench')),
      coresBusy: round2(total / wall), coresBusyWithBench: round2((total + d('bench')) / wall), machineCoresBusy: round2(d('machine') / wall),
      runnerUsPerMsg: us('runners'), brokerUsPerMsg: us('broker'), postgresUsPerMsg: us('postgres'), totalUsPerMsg: Math.round((total * 1e6) / messages),
    };
  }

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
  function spawnChild(kind, queryId, total) {
    const proc = spawn(process.execPath, [fileURLToPath(import.meta.url), '--child', JSON.stringify({ kind, queryId, sink: `bench.sink.${kind}`, url: broker.url, total })], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const rss = rssSampler(proc.pid, 100);
    let out = '';
    proc.stdout.on('data', (d) => (out += d));
    const exited = new Promise((r) => proc.once('exit', r));
    return {
      proc,
      async result(label) {
        const code = await exited;
        const r = await rss.stop();
        if (code !== 0) throw new Error(`${label} child exited ${code}: ${out}`);
        return { ...JSON.parse(out.trim().split('\n').pop()), rssPeakMB: mb(r.peakBytes) };
      },
    };
  }

  // A query's progress read from its cursors every 20 ms. CPU is read at the
  // first ack seen and once the last is in (a reading scans /proc: a few ms),
  // the steady window; runners are stopped after it (their CPU is read live).
  async function watch(queryId, pids) {
    const acked = async () => Number((await sql.query(`select coalesce(sum(c.cursor_offset), 0) as n from queen.cursors c where c.consumer_group = $1`, [`streams.${queryId}`])).rows[0].n);
    const t0 = performance.now();
    let first = null;
    let last = null;
    for (let moved = 0; moved < TOTAL && performance.now() - t0 < 150_000; ) {
      await new Promise((r) => setTimeout(r, 20));
      moved = await acked();
      if (moved > (last?.n ?? 0)) {
        last = { at: performance.now(), n: moved };
        if (!first) first = { ...last, cpu: cpuNow(pids) };
      }
    }
    const cpu = first && last.n > first.n ? cpuSplit(first.cpu, cpuNow(pids), last.n - first.n) : null;
    return { t0, first, last, count: last?.n ?? 0, cpu };
  }

  async function runChild(kind, label, round) {
    progress(NAME, `${label} #${round}: runner child (${kind})`);
    const queryId = `bench.${kind}.${round}`;
    const child = spawnChild(kind, queryId, TOTAL);
    const w = await watch(queryId, [child.proc.pid]);
    child.proc.kill('SIGTERM');
    const res = await child.result(label);
    if (res.messages < TOTAL) throw new Error(`${label}: only ${res.messages}/${TOTAL} messages in time (${res.errors.join('; ')})`);
    return {
      path: label, round, messages: res.messages, seconds: round2(res.seconds), msgPerSec: Math.round(res.messages / res.seconds),
      steadyMsgPerSec: res.steadySeconds ? Math.round(res.steadyMessages / res.steadySeconds) : null, cycles: res.cycles, errors: res.errorCount, rssPeakMB: res.rssPeakMB, cpu: w.cpu,
    };
  }

  // (c) N runners of one query share the partitions by lease: progress is
  // read from the query's cursors, from the first ack to the last.
  async function runMany(kind, n, label, round) {
    progress(NAME, `${label} #${round}: ${n} runner children (${kind})`);
    const queryId = `bench.${kind}.x${n}.${round}`;
    const children = Array.from({ length: n }, () => spawnChild(kind, queryId, 0));
    const { t0, first, last, count, cpu } = await watch(queryId, children.map((c) => c.proc.pid));
    for (const c of children) c.proc.kill('SIGTERM');
    const results = await Promise.all(children.map((c) => c.result(label)));
    if (count < TOTAL) throw new Error(`${label}: only ${count}/${TOTAL} messages in time`);
    return {
      path: label, round, messages: count, seconds: round2((last.at - t0) / 1000), msgPerSec: Math.round(count / ((last.at - t0) / 1000)),
      steadyMsgPerSec: last.at > first.at ? Math.round((count - first.n) / ((last.at - first.at) / 1000)) : null,
      cycles: results.reduce((a, r) => a + r.cycles, 0), errors: results.reduce((a, r) => a + r.errorCount, 0), rssPeakMB: Math.max(...results.map((r) => r.rssPeakMB)), cpu,
      perRunner: results.map((r) => ({ messages: r.messages, cycles: r.cycles })),
    };
  }

  // The plain-SQL ceiling: the source copied into tables of its own (no
  // function of ours anywhere), one connection, one transaction per cycle of
  // one partition, partitions taken in turn.
  await sql.query(`
    create schema plain;
    create table plain.source (partition_id int not null, msg_offset bigint not null, payload jsonb, created_at timestamptz not null, primary key (partition_id, msg_offset));
    create table plain.cursors (query text not null, partition_id int not null, cursor bigint not null default 0, primary key (query, partition_id));
    create table plain.state (query text not null, partition_id int not null, key text collate "C" not null, value jsonb, version bigint not null, primary key (query, partition_id, key));
    create sequence plain.state_version;
    create table plain.sink_partitions (id int primary key, head bigint not null default 0);
    create table plain.sink (partition_id int not null, msg_offset bigint not null, id uuid not null, payload jsonb, created_at timestamptz not null default now(), primary key (partition_id, msg_offset));
    insert into plain.source select substr(p.name, 2)::int, m.msg_offset, m.payload, m.created_at
      from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = '${SOURCE}';
    insert into plain.sink_partitions select g from generate_series(0, ${PARTITIONS - 1}) g;`);

  async function plainCeiling(kind, round) {
    const label = `plain SQL: ${kind}`;
    progress(NAME, `${label} #${round}`);
    const query = `${kind}.${round}`;
    await sql.query('insert into plain.cursors (query, partition_id) select $1, g from generate_series(0, $2 - 1) g', [query, PARTITIONS]);
    const client = await sql.connect();
    let messages = 0;
    let cycles = 0;
    let firstCommitAt = null;
    let firstCommitMessages = 0;
    let lastCommitAt = null;
    let firstCpu = null;
    const done = new Set();
    const t0 = performance.now();
    try {
      for (let p = 0; done.size < PARTITIONS; p = (p + 1) % PARTITIONS) {
        if (done.has(p)) continue;
        await client.query('begin');
        await client.query('select pg_advisory_xact_lock(hashtextextended($1, 0))', [`${query}:${p}`]);
        const { rows: cur } = await client.query('select cursor from plain.cursors where query = $1 and partition_id = $2 for update', [query, p]);
        const { rows: msgs } = await client.query('select msg_offset, payload, created_at from plain.source where partition_id = $1 and msg_offset > $2 order by msg_offset limit $3', [p, cur[0].cursor, BATCH]);
        if (msgs.length === 0) {
          await client.query('commit');
          done.add(p);
          continue;
        }
        let outputs;
        if (kind === 'map') {
          outputs = msgs.map((m) => m.payload);
        } else {
          const { rows: stored } = await client.query('select key, value, version from plain.state where query = $1 and partition_id = $2', [query, p]);
          const windows = new Map(stored.map((s) => [s.key, { ...s.value, version: Number(s.version) }]));
          let clock = 0;
          for (const m of msgs) {
            const ts = m.created_at.getTime();
            clock = Math.max(clock, ts);
            const start = Math.floor(ts / (WINDOW_SECONDS * 1000)) * WINDOW_SECONDS * 1000;
            const key = `tumb:${WINDOW_SECONDS}${SEP}${new Date(start).toISOString()}${SEP}${p}`;
            let w = windows.get(key);
            if (!w) windows.set(key, (w = { acc: { count: 0, sum: 0 }, windowStart: start, windowEnd: start + WINDOW_SECONDS * 1000, version: 0 }));
            w.acc.count += 1;
            w.acc.sum += m.payload.amount;
            w.dirty = true;
          }
          outputs = [];
          const upserts = [];
          const deletes = [];
          for (const [key, w] of windows) {
            if (w.windowEnd <= clock) {
              if (w.version) deletes.push(key);
              outputs.push(w.acc);
            } else if (w.dirty) upserts.push([key, JSON.stringify({ acc: w.acc, windowStart: w.windowStart, windowEnd: w.windowEnd })]);
          }
          if (deletes.length) await client.query('delete from plain.state where query = $1 and partition_id = $2 and key = any($3::text[])', [query, p, deletes]);
          if (upserts.length) {
            await client.query(
              `insert into plain.state (query, partition_id, key, value, version)
               select $1, $2, k, v, nextval('plain.state_version') from unnest($3::text[], $4::jsonb[]) as u(k, v)
               on conflict (query, partition_id, key) do update set value = excluded.value, version = excluded.version`,
              [query, p, upserts.map((u) => u[0]), upserts.map((u) => u[1])]);
          }
        }
        if (outputs.length) {
          const { rows: head } = await client.query('update plain.sink_partitions set head = head + $2 where id = $1 returning head', [p, outputs.length]);
          await client.query(
            `insert into plain.sink (partition_id, msg_offset, id, payload)
             select $1, $2::bigint - $3::bigint + ord, gen_random_uuid(), o from unnest($4::jsonb[]) with ordinality as u(o, ord)`,
            [p, head[0].head, outputs.length, outputs.map((o) => JSON.stringify(o))]);
        }
        await client.query('update plain.cursors set cursor = $3 where query = $1 and partition_id = $2', [query, p, msgs[msgs.length - 1].msg_offset]);
        await client.query('commit');
        messages += msgs.length;
        cycles += 1;
        lastCommitAt = performance.now();
        if (firstCommitAt === null) {
          firstCommitAt = lastCommitAt;
          firstCommitMessages = messages;
          firstCpu = cpuNow([]);
        }
      }
    } catch (err) {
      await client.query('rollback').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
    const lastCpu = cpuNow([]);
    const seconds = (performance.now() - t0) / 1000;
    if (messages !== TOTAL) throw new Error(`ceiling moved ${messages}/${TOTAL} messages`);
    // The plain-SQL client is this process: its CPU is the "runner" here.
    for (const r of [firstCpu, lastCpu]) r.runners = r.bench;
    const cpu = cpuSplit(firstCpu, lastCpu, messages - firstCommitMessages);
    const steadySeconds = (lastCommitAt - firstCommitAt) / 1000;
    return {
      path: label, round, messages, seconds: round2(seconds), msgPerSec: Math.round(messages / seconds),
      steadyMsgPerSec: steadySeconds > 0 ? Math.round((messages - firstCommitMessages) / steadySeconds) : null, cycles, errors: 0, rssPeakMB: null,
      cpu: { ...cpu, benchCpuS: null, coresBusyWithBench: cpu.coresBusy },
    };
  }

  const rows = [];
  for (let round = 1; round <= 2; round++) {
    rows.push(await runChild('map', 'runner: map → sink', round));
    rows.push(await plainCeiling('map', round));
    rows.push(await runChild('tumbling', 'runner: tumbling aggregate', round));
    rows.push(await plainCeiling('tumbling', round));
    rows.push(await runMany('map', 2, 'two runners: map → sink', round));
    rows.push(await runChild('gate', 'runner: gate (always allow)', round));
  }
  const best = (path) => rows.filter((r) => r.path === path).reduce((a, b) => ((b.steadyMsgPerSec ?? 0) > (a.steadyMsgPerSec ?? 0) ? b : a));
  const map = best('runner: map → sink');
  const mapPlain = best('plain SQL: map');
  const tumbling = best('runner: tumbling aggregate');
  const tumblingPlain = best('plain SQL: tumbling');
  const two = best('two runners: map → sink');
  const gate = best('runner: gate (always allow)');

  // Cross-checks: every path emitted what it should (a fast wrong answer is no answer).
  const count = async (queue) => Number((await sql.query('select count(*) from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1', [queue])).rows[0].count);
  const sinkCounts = { map: await count('bench.sink.map'), gate: await count('bench.sink.gate'), tumbling: await count('bench.sink.tumbling'),
    plainMap: Number((await sql.query('select count(*) from plain.sink')).rows[0].count) };
  // map: 2 single-runner rounds + 2 two-runner rounds, one output per input.
  if (sinkCounts.map !== 4 * TOTAL || sinkCounts.gate !== 2 * TOTAL || sinkCounts.tumbling < 1) throw new Error(`sink counts off: ${JSON.stringify(sinkCounts)}`);

  const ratio = (a, b) => Math.round((a / b) * 100) / 100;
  const rssPeak = Math.max(...rows.filter((r) => r.rssPeakMB !== null).map((r) => r.rssPeakMB));
  const check = (measure, value, target, unit = '×', le = false) => ({ measure, value: `${value}${unit}`, target: `${le ? '≤' : '≥'} ${target}${unit}`, met: (le ? value <= target : value >= target) ? 'yes' : 'NO' });
  const summary = [
    check('map → sink runner / plain-SQL ceiling (steady)', ratio(map.steadyMsgPerSec, mapPlain.steadyMsgPerSec), 0.5),
    check('tumbling runner / plain-SQL ceiling (steady)', ratio(tumbling.steadyMsgPerSec, tumblingPlain.steadyMsgPerSec), 0.5),
    check('two map runners / one (steady)', ratio(two.steadyMsgPerSec, map.steadyMsgPerSec), 1.3),
    check('gate (allow) / map (steady)', ratio(gate.steadyMsgPerSec, map.steadyMsgPerSec), 0.7),
    check('runner RSS peak', rssPeak, 120, ' MB', true),
    // The floor: with the CPU one runner's path already takes (runner + broker
    // + PostgreSQL), how much faster the whole machine could go at best.
    { measure: `cores busy: one map runner, broker and PostgreSQL (steady; ${two.cpu.coresBusy} with two runners)`, value: `${map.cpu.coresBusy}`, target: `of ${CORES}`, met: '' },
    check(`two runners / one at most on ${CORES} cores (${CORES} / cores busy with one)`, ratio(CORES, map.cpu.coresBusy), 1.3),
    // Tighter: at the CPU per message the two runners' path actually spent.
    check(`two runners / one at most on ${CORES} cores at the two-runner path's ${two.cpu.totalUsPerMsg} µs CPU per message`, ratio((CORES * 1e6) / two.cpu.totalUsPerMsg, map.steadyMsgPerSec), 1.3),
  ];
  await broker.stop();
  await sql.end();
  await db.stop();

  const results = {
    ...resultsHead(NAME, db, loadAtStart),
    settings: { partitions: PARTITIONS, perPartition: PER_PARTITION, messages: TOTAL, batchSize: BATCH, maxPartitions: PARTITIONS, windowSeconds: WINDOW_SECONDS, payloadBytes: JSON.stringify(payload(1)).length },
    notes: [
      'Every runner run reads the same pre-pushed messages (8 partitions) through its own consumer group from the start. Paths alternate, twice each; the summary compares the best steady rate of each path. msgPerSec = source messages acked / seconds from start to the last ack; steadyMsgPerSec = messages acked after the first commit / seconds from the first commit to the last (startup, first connections and JIT excluded).',
      'runner paths: queen-mq from dist/ in a child process (RSS sampled from /proc every 100 ms), batchSize 500, maxPartitions 8, against apps/broker/dist/main.js in another child process. Two runners: two children of one query; progress read from its cursors every 20 ms.',
      'cpu (per row): CPU seconds from /proc over the steady window (runner paths: first to last ack seen in the cursors, read every 20 ms; plain SQL: first to last commit) of the runner process(es), the broker process and PostgreSQL (postmaster, its reaped children and every live backend); coresBusy = their sum / wall seconds (coresBusyWithBench adds this process: cursor polling, RSS and CPU sampling; machineCoresBusy is every process on the machine, from /proc/stat: the gap to ours is other work); µs per message = CPU / messages acked in the window. For plain SQL the runner is this process (its pg client). The machine has ' + CORES + ' cores: a path whose cores busy is near that can only go faster with less CPU per message.',
      'plain SQL: the source copied into tables of its own; one pg connection; per cycle of one partition one transaction: advisory lock, cursor row FOR UPDATE, 500 rows after it, (tumbling) the state rows and one upsert + one delete statement, one head move of the sink partition and one INSERT … unnest of the outputs, the cursor update. No function of ours, no dedup, no HTTP.',
    ],
    summary,
    rows,
    sinkMessages: sinkCounts,
    seconds: Math.round((Date.now() - started) / 1000),
  };
  const file = await writeResults(NAME, results);
  console.log(`\nQueen streams benchmark (${TOTAL} messages over ${PARTITIONS} partitions, batch ${BATCH}, PostgreSQL ${db.settings.server_version}${db.embedded ? ' embedded' : ''}, fsync=${db.settings.fsync}, load ${loadAtStart})\n`);
  console.log(table(['path', 'round', 'messages', 'seconds', 'msgPerSec', 'steadyMsgPerSec', 'cycles', 'errors', 'rssPeakMB'], rows));
  console.log('\nCPU over each steady window (runner: the runner process(es); for plain SQL, this process as its client), µs per message:\n');
  console.log(table(['path', 'round', 'wall s', 'cores busy', 'machine busy', 'runner µs', 'broker µs', 'postgres µs', 'total µs'], rows.map((r) => ({
    path: r.path, round: r.round, 'wall s': r.cpu.wallSeconds, 'cores busy': r.cpu.coresBusy, 'machine busy': r.cpu.machineCoresBusy, 'runner µs': r.cpu.runnerUsPerMsg, 'broker µs': r.cpu.brokerUsPerMsg, 'postgres µs': r.cpu.postgresUsPerMsg, 'total µs': r.cpu.totalUsPerMsg,
  }))));
  console.log('');
  console.log(table(['measure', 'value', 'target', 'met'], summary));
  console.log(`\nsink messages: ${JSON.stringify(sinkCounts)}; took ${results.seconds}s`);
  console.log(`results: ${file}`);
}

/** Busy CPU seconds of the whole machine so far (every process: other work shows as the gap to ours). */
function machineBusySeconds() {
  try {
    const [, user, nice, system, , , irq, softirq, steal] = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).map(Number);
    return (user + nice + system + irq + softirq + steal) / 100;
  } catch {
    return 0;
  }
}

function round2(v) {
  return Math.round(v * 100) / 100;
}
