import pg from 'pg';
import { Queen } from '@queen-mq/client';
import { spawnBroker, startDatabase, cpuSecondsOf } from './_lib.mjs';
const db = await startDatabase('pgfn');
const admin = new pg.Client({ connectionString: db.url }); await admin.connect();
const builds = { this: undefined, base: '/tmp/base/apps/broker/dist/main.js' };
const urls = {};
for (const b of Object.keys(builds)) {
  await admin.query(`create database fn_${b}`);
  await admin.query(`alter database fn_${b} set track_functions = 'all'`);
  const u = new URL(db.url); u.pathname = `/fn_${b}`; urls[b] = u.toString();
}
const env = process.env.FIXED ? { QUEEN_FIXED_YOUNG_GENERATION: 'true' } : {};
const brokers = {};
for (const b of Object.keys(builds)) brokers[b] = await spawnBroker(b, urls[b], env, [], builds[b]);
const payload = (i) => ({ n: i, kind: 'bench.event', customer: `c-${i % 97}`, note: 'x'.repeat(48) });
const batch = () => Array.from({ length: 100 }, (_, j) => ({ payload: payload(j) }));
async function consume(queen, queue, until, onMoved, waitMs) {
  while (!until()) {
    const r = await queen.queue(queue).pop({ batch: 100, wait: true, timeout: waitMs });
    if (!r?.messages.length) continue;
    await queen.ack(r.messages);
    onMoved(r.messages.length);
  }
}
const WL = (process.env.WL ?? 'drain').split(',');
const totals = { this: 0, base: 0 };
for (const round of [1, 2, 3]) for (const b of round % 2 ? ['this', 'base'] : ['base', 'this']) {
  const queen = new Queen({ url: brokers[b].url });
  for (const wl of WL) {
    const queue = `${wl}${round}`;
    let moved = 0;
    if (wl === 'drain') {
      await Promise.all(Array.from({ length: 8 }, async (_, p) => { for (let i = 0; i < 50; i++) await queen.queue(queue).partition(`p${p}`).push(batch()); }));
      const c = cpuSecondsOf(brokers[b].pid); const t = performance.now();
      await Promise.all(Array.from({ length: 4 }, () => consume(queen, queue, () => moved >= 40000, (n) => (moved += n), 100)));
      console.log(round, b, wl, Math.round(moved / ((performance.now() - t) / 1000)), 'msg/s; broker µs/msg', Math.round((cpuSecondsOf(brokers[b].pid) - c) * 1e6 / moved));
    } else {
      const end = performance.now() + 6000; const over = () => performance.now() >= end;
      const c = cpuSecondsOf(brokers[b].pid);
      const producer = (async () => { for (let i = 0; !over(); i++) await queen.queue(queue).partition(`p${i % 8}`).push(batch()); })();
      await Promise.all([producer, ...Array.from({ length: 4 }, () => consume(queen, queue, over, (n) => (moved += n), 200))]);
      console.log(round, b, wl, Math.round(moved / 6), 'msg/s; broker µs/msg', Math.round((cpuSecondsOf(brokers[b].pid) - c) * 1e6 / moved));
    }
    totals[b] += moved;
  }
  await queen.close();
}
for (const b of Object.keys(builds)) {
  const c = new pg.Client({ connectionString: urls[b] }); await c.connect();
  const { rows } = await c.query(`select schemaname||'.'||funcname f, calls, round(total_time::numeric,0) total_ms, round(self_time::numeric,0) self_ms from pg_stat_user_functions order by total_time desc limit 14`);
  console.log(`== ${b}: ${totals[b]} msgs`);
  for (const r of rows) console.log(String(r.total_ms).padStart(7), String(r.self_ms).padStart(7), String(r.calls).padStart(7), (r.total_ms * 1000 / totals[b]).toFixed(2).padStart(6), 'µs/msg', r.f);
  await c.end();
}
await admin.end();
for (const b of Object.values(brokers)) await b.stop();
await db.stop();
