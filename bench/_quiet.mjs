// Quiet-time measures of bench/scale.mjs (issue 31): what the broker and
// PostgreSQL cost while nothing happens (the idle floor) and while long-poll
// pops are parked on many distinct queues, how soon one push wakes the pop
// parked on its queue, and the broker's RSS meanwhile. CPU comes from /proc
// (no query to PostgreSQL inside a window), per PostgreSQL process role.
import http from 'node:http';
import { readFileSync, readdirSync } from 'node:fs';
import { cpuSecondsOf, mb, parentPidOf, percentile, rssOf } from './_lib.mjs';

/** The postmaster of the cluster `sql` talks to (the parent of its backend). */
export async function postmasterOf(sql) {
  return parentPidOf((await sql.query('select pg_backend_pid() as pid')).rows[0].pid);
}

/** What a PostgreSQL process does, from the title it sets (what ps shows). */
function roleOf(pid) {
  let title;
  try {
    title = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    return null;
  }
  if (title.includes('autovacuum worker')) return 'autovacuum';
  // Backends are titled "postgres: <user> <database> <host>(<port>) <state>".
  return /\(\d+\)/.test(title) ? 'backends' : 'background';
}

/** CPU seconds so far: the broker's, and PostgreSQL's by role (exited = children the postmaster reaped). */
function snapshot(brokerPid, postmaster) {
  const pg = { backends: 0, autovacuum: 0, background: cpuSecondsOf(postmaster), exited: cpuSecondsOf(postmaster, { children: true }) - cpuSecondsOf(postmaster) };
  const live = new Map();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d) || parentPidOf(d) !== postmaster) continue;
    const role = roleOf(d);
    if (!role) continue;
    const s = cpuSecondsOf(d);
    pg[role] += s;
    live.set(d, s);
  }
  return { broker: cpuSecondsOf(brokerPid), pg, live, postmaster: cpuSecondsOf(postmaster), at: performance.now() };
}

/** Broker cores under which a 5 s sample after parking counts as settled, and the longest wait for two such samples running. */
const SETTLED_CORES = 0.02;
const GC_SETTLE_MAX_S = 90;

/** The broker's pool closes a connection idle this long (database.ts), plus a margin. */
const POOL_IDLE_MS = 32_000;

const cores = (seconds, elapsed) => Math.round((seconds / elapsed) * 10000) / 10000;

/**
 * Runs `during` (default: a sleep of `seconds`) and answers the cores the
 * broker and PostgreSQL used meanwhile (CPU seconds per second), PostgreSQL
 * also by role. A process that exits in the window counts under `exited`
 * with all of its CPU, so the roles are approximate; the total is exact.
 */
export async function cpuWindow({ brokerPid, postmaster, seconds, during }) {
  const a = snapshot(brokerPid, postmaster);
  const value = await (during ? during() : new Promise((r) => setTimeout(r, seconds * 1000)));
  const b = snapshot(brokerPid, postmaster);
  const elapsed = (b.at - a.at) / 1000;
  const byRole = Object.fromEntries(Object.keys(a.pg).map((k) => [k, cores(b.pg[k] - a.pg[k], elapsed)]));
  // A PostgreSQL process that ends in the window takes its CPU so far out
  // of the live ones; the postmaster's reaped-children time should grow by
  // at least as much (it did not always: a negative total). So PostgreSQL's
  // CPU is the live processes' growth (new ones whole), the postmaster's
  // own, and what the reaped-children time grew beyond the ended processes'
  // CPU at the window's start, never less than nothing.
  const ended = [...a.live].filter(([pid]) => !b.live.has(pid));
  const endedAtStart = ended.reduce((s, [, v]) => s + v, 0);
  let pgTotal = (b.postmaster - a.postmaster) + Math.max(0, b.pg.exited - a.pg.exited - endedAtStart);
  for (const [pid, v] of b.live) pgTotal += v - (a.live.get(pid) ?? 0);
  const endedProcesses = { n: ended.length, cpuSecondsAtStart: Math.round(endedAtStart * 100) / 100, exitedSeconds: Math.round((b.pg.exited - a.pg.exited) * 100) / 100 };
  return { seconds: Math.round(elapsed * 100) / 100, brokerCores: cores(b.broker - a.broker, elapsed), postgresCores: cores(pgTotal, elapsed), postgresByRole: byRole, endedProcesses, value };
}

/** Transactions committed or rolled back in this database so far (backends report them within a second or so). */
async function transactions(sql) {
  const { rows } = await sql.query('select (xact_commit + xact_rollback)::bigint as n from pg_stat_database where datname = current_database()');
  return Number(rows[0].n);
}

/**
 * Whether autovacuum runs or is due to (a table past its default vacuum,
 * insert or analyze threshold): after a bulk load it works for a minute or
 * more, the load's aftermath, not the floor.
 */
async function autovacuumPending(sql) {
  const { rows } = await sql.query(
    `select (select count(*) from pg_stat_activity where backend_type = 'autovacuum worker')
          + (select count(*) from pg_stat_user_tables s join pg_class c on c.oid = s.relid
              where s.n_dead_tup > 50 + 0.2 * greatest(c.reltuples, 0)
                 or s.n_ins_since_vacuum > 1000 + 0.2 * greatest(c.reltuples, 0)
                 or s.n_mod_since_analyze > 50 + 0.1 * greatest(c.reltuples, 0))::int as n`,
  );
  return rows[0].n > 0;
}

/**
 * The idle floor: nothing is sent to the broker for `seconds`. First waits
 * until autovacuum has nothing left to do and, given the broker's `url`,
 * until its listing totals backlog is empty (a seeding's first pops leave
 * whole queues to recount: docs/listing-totals.md) — at most
 * `settleMaxSeconds`, and says how long it waited — then measures.
 * `transactionsPerSecond` is read from pg_stat_database around the window
 * (two queries of ours outside it, subtracted).
 */
export async function idleFloor({ brokerPid, postmaster, sql, seconds, url = null, settleMaxSeconds = 240 }) {
  const started = performance.now();
  const totalsBacklogAtStart = url ? await totalsBacklog(url) : null;
  // The broker's pool lets connections go after 30 s idle (each a backend ending): the floor comes after.
  await new Promise((r) => setTimeout(r, POOL_IDLE_MS));
  const busy = async () => (await autovacuumPending(sql)) || (url !== null && (await totalsBacklog(url)) > 0);
  while ((await busy()) && performance.now() - started < settleMaxSeconds * 1000) await new Promise((r) => setTimeout(r, 1000));
  const settledSeconds = Math.round((performance.now() - started) / 100) / 10;
  // Let the statistics of what ran before settle, so the count below is the window's.
  await new Promise((r) => setTimeout(r, 1500));
  const before = await transactions(sql);
  const w = await cpuWindow({ brokerPid, postmaster, seconds });
  await new Promise((r) => setTimeout(r, 1500));
  const after = await transactions(sql);
  const { value: _v, ...window } = w;
  return { settledSeconds, totalsBacklogAtStart, ...window, transactionsPerSecond: Math.round(((after - before - 1) / w.seconds) * 100) / 100, brokerRssMb: mb(await rssOf(brokerPid)) };
}

/** The queen_long_poll_waiting gauge of the broker's /metrics. */
async function parkedNow(url) {
  const text = await (await fetch(`${url}/metrics`)).text();
  return Number(/^queen_long_poll_waiting (\d+)/m.exec(text)?.[1] ?? NaN);
}

/** Partitions waiting for the broker's listing totals recount (queen_listing_totals_backlog, every kind but the watched leases). */
async function totalsBacklog(url) {
  const text = await (await fetch(`${url}/metrics`)).text();
  let n = 0;
  for (const m of text.matchAll(/^queen_listing_totals_backlog\{kind="(\w+)"\} (\d+)/gm)) if (m[1] !== 'leased') n += Number(m[2]);
  return n;
}

/** A long-poll pop over its own socket; `answer` resolves with its status and when its headers arrived. */
function openPop(agent, url, path) {
  let req;
  const answer = new Promise((resolve) => {
    req = http.get(`${url}${path}`, { agent }, (res) => {
      const at = performance.now();
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode, at, body }));
      res.on('error', (err) => resolve({ status: 'error', at, error: err.message }));
    });
    req.on('error', (err) => resolve({ status: 'error', at: performance.now(), error: err.message }));
  });
  const pop = { req, answer, settled: false };
  answer.then(() => (pop.settled = true));
  return pop;
}

const wait = (ms) => new Promise((r) => setTimeout(r, ms));
const round2 = (v) => (v === null ? null : Math.round(v * 100) / 100);

/**
 * Parks one long-poll pop on each of `targets` ({ queue, query }), each over
 * its own socket, and waits until the broker counts them parked. Then, with
 * nothing else happening: the cores of the broker and PostgreSQL over the
 * 32 s after parking and over `seconds` after those (the steady state), the
 * broker's RSS, and the wake latency of `samples` pushes, each
 * to a different parked queue (from sending the push to the parked pop's
 * answer; `push(queue, payload)` sends it). Finally closes every socket and
 * waits until the broker has let the abandoned pops go.
 */
export async function parkedPops({ url, brokerPid, postmaster, sql, targets, seconds, samples, timeoutMs, push, log, backlogMaxSeconds = 200 }) {
  const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
  const open = (t) => openPop(agent, url, `/api/v1/pop/queue/${encodeURIComponent(t.queue)}?wait=true&timeout=${timeoutMs}${t.query ?? ''}`);
  const pops = [];
  const openedAt = performance.now();
  const rssBefore = await rssOf(brokerPid);
  // In slices: 10,000 connects at once overflow the listen backlog (a dropped SYN is retried after a second).
  for (let i = 0; i < targets.length; i += 250) {
    for (const t of targets.slice(i, i + 250)) pops.push(open(t));
    await wait(20);
  }
  // A pop answered with an error while they all arrive (the first pop of a
  // named group creates its cursor rows: 10,000 of them at once can wait for
  // a pool connection past its bound and answer 503) is sent again, as a
  // client would, up to 5 times.
  let parked = 0;
  let resent = 0;
  const attempts = new Array(targets.length).fill(1);
  const deadline = performance.now() + 240_000;
  for (;;) {
    parked = await parkedNow(url);
    let answered = 0;
    for (let i = 0; i < pops.length; i++) {
      if (!pops[i].settled) continue;
      const { status } = await pops[i].answer;
      if (status !== 200 && status !== 204 && attempts[i] < 5) {
        attempts[i] += 1;
        resent += 1;
        pops[i] = open(targets[i]);
      } else answered += 1;
    }
    if (parked + answered >= targets.length || performance.now() > deadline) break;
    log?.(`${parked} of ${targets.length} pops parked, ${answered} answered, ${resent} sent again`);
    await wait(2000);
  }
  const parkSeconds = round2((performance.now() - openedAt) / 1000);
  // The first seconds after parking them all still pay for it (V8's memory
  // reducer collects the parking's garbage some 10-20 s later, the pool lets
  // the connections the parking opened go after 30 s idle): measured apart,
  // and the window of the parked steady state starts after them.
  const { value: _s, ...afterParking } = await cpuWindow({ brokerPid, postmaster, seconds: POOL_IDLE_MS / 1000 });
  // The first pops of a group on a queue leave its partitions to the listing
  // totals' background recount (docs/listing-totals.md), paced to about
  // 1,000 partitions a second: a one-time cost of the parking, measured
  // apart, up to `backlogMaxSeconds`; the steady state starts after it.
  const backlog = await cpuWindow({
    brokerPid,
    postmaster,
    during: async () => {
      const from = performance.now();
      let left = await totalsBacklog(url);
      while (left > 0 && performance.now() - from < backlogMaxSeconds * 1000) {
        await wait(1000);
        left = await totalsBacklog(url);
      }
      return left;
    },
  });
  const totalsRecount = { seconds: backlog.seconds, postgresCores: backlog.postgresCores, brokerCores: backlog.brokerCores, leftAtEnd: backlog.value };
  // A parking that ran into the pool's bound (many first pops of a group at
  // once answer 503 and are sent again) leaves the broker a heap of garbage
  // that V8's memory reducer collects whenever it judges the process idle:
  // hundreds of ms of CPU that fell into the steady window in some runs and
  // not in others. The window starts once the broker used at most
  // SETTLED_CORES in each of two 5 s samples running, or after
  // GC_SETTLE_MAX_S: a cost that stays is still measured.
  const settling = performance.now();
  for (let calm = 0; calm < 2 && performance.now() - settling < GC_SETTLE_MAX_S * 1000; ) {
    const sample = await cpuWindow({ brokerPid, postmaster, seconds: 5 });
    calm = sample.brokerCores <= SETTLED_CORES ? calm + 1 : 0;
  }
  const gcSettleSeconds = round2((performance.now() - settling) / 1000);
  const before = await transactions(sql);
  const w = await cpuWindow({ brokerPid, postmaster, seconds });
  const rssParked = await rssOf(brokerPid);
  await wait(1500);
  const after = await transactions(sql);
  // Pops answered before the wake samples (none should be): by status.
  const early = {};
  for (const p of pops) {
    if (!p.settled) continue;
    const { status } = await p.answer;
    early[status] = (early[status] ?? 0) + 1;
  }

  // Wake latency: one push at a time, each to another parked queue, spread over the targets.
  const ms = [];
  const failures = [];
  const step = Math.max(1, Math.floor(targets.length / samples));
  for (let s = 0; s < samples && s * step < targets.length; s++) {
    const k = s * step;
    const t0 = performance.now();
    const pushed = push(targets[k].queue, { wake: s });
    const a = await Promise.race([pops[k].answer, wait(10_000).then(() => ({ status: 'no answer within 10 s', at: performance.now() }))]);
    await pushed;
    if (a.status === 200) ms.push(a.at - t0);
    else failures.push({ queue: targets[k].queue, status: a.status });
  }
  ms.sort((x, y) => x - y);
  const wake = { n: ms.length, p50Ms: round2(percentile(ms, 50)), p99Ms: round2(percentile(ms, 99)), maxMs: round2(ms.at(-1) ?? null), failures, samplesMs: ms.map(round2) };

  // Every socket closed: the broker drops the abandoned pops.
  for (const p of pops) p.req.destroy();
  agent.destroy();
  let left = await parkedNow(url);
  for (let i = 0; i < 60 && left > 0; i++) {
    await wait(500);
    left = await parkedNow(url);
  }
  const { value: _v, ...window } = w;
  return {
    pops: targets.length, parked, parkSeconds, resentWhileParking: resent, afterParking, totalsRecount, gcSettleSeconds, ...window, answeredBeforeWindowEnd: early,
    transactionsPerSecond: round2((after - before - 1) / w.seconds),
    brokerRssMb: mb(rssParked), brokerRssBeforeMb: mb(rssBefore), wake, leftParkedAfterClose: left,
  };
}
