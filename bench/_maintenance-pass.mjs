// Maintenance passes of bench/scale.mjs (issue 31): the time and CPU of one
// pass through POST /api/v1/system/maintenance/run, which runs what the
// periodic service runs (runMaintenance in packages/broker/src/maintenance/retention.ts),
// per task with nothing to delete (at full scale the seeded queues keep their
// messages a day: retention has every partition of theirs to consider and
// nothing to drop); then a retention pass and a partition cleanup pass that
// delete the same amount at every scale. A pass that costs what it deletes,
// not what exists, reads the same at empty and full scale.
import { cpuWindow } from './_quiet.mjs';

const TASKS = ['retention', 'partitions', 'kv', 'timers', 'state'];
const wait = (ms) => new Promise((r) => setTimeout(r, ms));
const round2 = (v) => Math.round(v * 100) / 100;

/** One pass of `tasks`: its wall time, the cores it kept busy meanwhile, and the broker's answer. */
async function timedPass(call, tasks, cpu) {
  const t = performance.now();
  const w = await cpuWindow({ ...cpu, during: async () => (await call('POST', '/api/v1/system/maintenance/run', { tasks })).json() });
  const ms = performance.now() - t;
  // CPU seconds of the pass: cores x its wall time.
  return { ms: round2(ms), brokerCpuMs: round2(w.brokerCores * w.seconds * 1000), postgresCpuMs: round2(w.postgresCores * w.seconds * 1000), result: w.value };
}

/** The median (by wall time) of `n` passes. */
async function medianPass(n, call, tasks, cpu) {
  const runs = [];
  for (let i = 0; i < n; i++) runs.push(await timedPass(call, tasks, cpu));
  runs.sort((a, b) => a.ms - b.ms);
  return { n, ...runs[Math.floor(n / 2)] };
}

/**
 * `call(method, path, body)` talks to the broker, `push(items)` pushes,
 * `sql` is a pool on its database; `cleanupSeconds` is the broker's
 * QUEEN_PARTITION_CLEANUP_S (the deleting cleanup pass waits that long);
 * `retained`: queues given a day's retention first.
 */
export async function maintenancePasses({ call, push, sql, brokerPid, postmaster, tag, retained = [], queues = 100, partitions = 10, cleanupSeconds, log }) {
  const cpu = { brokerPid, postmaster };
  const out = { idle: {}, sql: {} };
  if (retained.length) {
    // In SQL, one statement (thousands of configure calls would take a minute); retention reads the options at each pass.
    await sql.query(`update queen.queues set options = options || '{"retentionEnabled": true, "retentionSeconds": 86400}'::jsonb where name = any($1)`, [retained]);
  }
  out.retainedPartitions = Number((await sql.query('select count(*) as n from queen.partitions p join queen.queues q on q.id = p.queue_id where q.name = any($1)', [retained])).rows[0].n);
  log?.(`[${tag}] maintenance passes with nothing to delete`);
  for (const task of TASKS) out.idle[task] = await medianPass(3, call, [task], cpu);
  out.idle.all = await medianPass(3, call, TASKS, cpu);
  // The statement a retention pass starts with, alone.
  const cand = [];
  let candidates = 0;
  for (let i = 0; i < 3; i++) {
    const t = performance.now();
    candidates = Number((await sql.query('select count(*) as n from queen.log_retention_candidates_v1()')).rows[0].n);
    cand.push(performance.now() - t);
  }
  cand.sort((a, b) => a - b);
  out.sql.retentionCandidates = { ms: round2(cand[1]), candidates };

  log?.(`[${tag}] a retention pass and a cleanup pass deleting ${queues} x ${partitions} partitions' messages`);
  const names = Array.from({ length: queues }, (_, q) => `ret-${tag}-${q}`);
  await push(names.flatMap((queue) => Array.from({ length: partitions }, (_, p) => ({ queue, partition: `p${p}`, payload: { p } }))));
  for (const queue of names) await call('POST', '/api/v1/configure', { queue, options: { retentionEnabled: true, retentionSeconds: 1 } });
  await wait(2100);
  out.deleting = { retention: await timedPass(call, ['retention'], cpu) };
  await wait((cleanupSeconds + 1) * 1000);
  out.deleting.partitions = await timedPass(call, ['partitions'], cpu);
  return out;
}
