import { Queen } from '@queen-mq/client';
import { spawnBroker, startDatabase, cpuSecondsOf } from './_lib.mjs';
const which = process.argv[2];
const script = which === 'base' ? '/tmp/base/apps/broker/dist/main.js' : undefined;
const db = await startDatabase('prof');
const broker = await spawnBroker('prof', db.url, {}, ['--cpu-prof', `--cpu-prof-dir=/tmp/prof-${which}`], script);
const queen = new Queen({ url: broker.url });
const payload = (i) => ({ n: i, kind: 'bench.event', customer: `c-${i % 97}`, note: 'x'.repeat(48) });
const batch = () => Array.from({ length: 100 }, (_, j) => ({ payload: payload(j) }));
async function consume(queue, until, onMoved, waitMs) {
  while (!until()) {
    const r = await queen.queue(queue).pop({ batch: 100, wait: true, timeout: waitMs });
    if (!r?.messages.length) continue;
    await queen.ack(r.messages);
    onMoved(r.messages.length);
  }
}
for (const round of [1, 2]) {
  const queue = `e2e${round}`;
  let moved = 0;
  const c0 = cpuSecondsOf(broker.pid);
  const end = performance.now() + 8000;
  const over = () => performance.now() >= end;
  const producer = (async () => { for (let i = 0; !over(); i++) await queen.queue(queue).partition(`p${i % 8}`).push(batch()); })();
  await Promise.all([producer, ...Array.from({ length: 4 }, () => consume(queue, over, (n) => (moved += n), 200))]);
  console.log(which, 'e2e', moved, Math.round((moved / 8)), 'msg/s broker us/msg', Math.round((cpuSecondsOf(broker.pid) - c0) * 1e6 / moved));
  const dq = `drain${round}`;
  await Promise.all(Array.from({ length: 8 }, async (_, p) => { for (let i = 0; i < 50; i++) await queen.queue(dq).partition(`p${p}`).push(batch()); }));
  moved = 0;
  const c1 = cpuSecondsOf(broker.pid); const t1 = performance.now();
  await Promise.all(Array.from({ length: 4 }, () => consume(dq, () => moved >= 40000, (n) => (moved += n), 100)));
  console.log(which, 'drain', Math.round(moved / ((performance.now() - t1) / 1000)), 'msg/s broker us/msg', Math.round((cpuSecondsOf(broker.pid) - c1) * 1e6 / moved));
}
await queen.close();
await broker.stop();
await db.stop();
