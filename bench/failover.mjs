// A PostgreSQL failover seen from a producer: a pg_auto_failover formation
// (monitor, primary, synchronous standby; @queen-mq/testing's PgAutoFailover,
// Debian's postgresql-15 and postgresql-15-auto-failover), the deployable
// broker on its multi-host URL, PRODUCERS producers pushing one item at a time
// (each with a transactionId, resent until answered 201), and the primary node
// crashed (kill -9 of its pg_autoctl run and everything under it) CRASHES
// times. Per crash: the promotion time (crash → the monitor has the standby
// as a writable primary), the longest gap between successful pushes around
// it, and that gap minus the promotion: the time the broker itself added.
// Prints one `failover:` line and writes bench/results/failover.json.
// Knobs: BENCH_FAILOVER_CRASHES (2), BENCH_FAILOVER_PRODUCERS (4).
import { PgAutoFailover, pgAutoFailoverMissing } from '@queen-mq/testing';
import { freePort } from '@queen-mq/broker';
import { loadNow, progress, spawnBroker, table, writeResults, machine } from './_lib.mjs';

const NAME = 'failover';
const CRASHES = Number(process.env.BENCH_FAILOVER_CRASHES ?? 2);
const PRODUCERS = Number(process.env.BENCH_FAILOVER_PRODUCERS ?? 4);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const missing = pgAutoFailoverMissing();
if (missing) {
  console.log(`failover: skipped (${missing})`);
  process.exit(0);
}

const loadAtStart = loadNow();
const f = new PgAutoFailover({ monitor: await freePort(), n1: await freePort(), n2: await freePort() });
let broker;
try {
  progress(NAME, `creating the formation in ${f.dir}`);
  await f.create();
  broker = await spawnBroker(NAME, f.brokerUrl);
  const oks = [];
  let running = true;
  let seq = 0;
  const producers = Array.from({ length: PRODUCERS }, async (_, w) => {
    while (running) {
      const id = `b-${w}-${seq++}`;
      for (;;) {
        const res = await fetch(`${broker.url}/api/v1/push`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ items: [{ queue: 'failover-bench', partition: `p${w}`, transactionId: id, payload: { id } }] }),
        }).catch(() => undefined);
        await res?.text();
        if (res?.status === 201) {
          oks.push(Date.now());
          break;
        }
        await sleep(20);
      }
    }
  });
  await sleep(3000);
  const rows = [];
  for (let i = 1; i <= CRASHES; i++) {
    const primary = await f.healthy();
    const standby = primary === 'n1' ? 'n2' : 'n1';
    const at = Date.now();
    progress(NAME, `crash ${i}: kill -9 of ${primary}`);
    f.crash(primary);
    const promotedAt = await f.promotedAt(standby);
    while (!oks.some((t) => t >= promotedAt) && Date.now() - promotedAt < 60000) await sleep(20);
    await sleep(2000);
    const times = [at - 1000, ...oks.filter((t) => t >= at - 1000)].sort((a, b) => a - b);
    let gap = 0;
    for (let k = 1; k < times.length; k++) gap = Math.max(gap, times[k] - times[k - 1]);
    rows.push({ crash: i, promotionMs: promotedAt - at, longestPushGapMs: gap, brokerAddedMs: gap - (promotedAt - at) });
    f.start(primary);
    await f.healthy();
  }
  running = false;
  await Promise.all(producers);
  console.log(table(['crash', 'promotionMs', 'longestPushGapMs', 'brokerAddedMs'], rows));
  const worst = rows.reduce((a, r) => (r.brokerAddedMs > a.brokerAddedMs ? r : a), rows[0]);
  console.log(`failover: longest push gap minus promotion time ${worst.brokerAddedMs} ms (gap ${worst.longestPushGapMs} ms, promotion ${worst.promotionMs} ms; worst of ${rows.length} crashes)`);
  const file = await writeResults(NAME, {
    benchmark: NAME,
    when: new Date().toISOString(),
    machine: { ...machine(), loadavg1mAtStart: loadAtStart },
    postgres: { version: '15', orchestrator: 'pg_auto_failover', nodes: 2, synchronous: true },
    producers: PRODUCERS,
    crashes: rows,
  });
  progress(NAME, `wrote ${file}`);
} finally {
  await broker?.stop();
  f.destroy();
}
