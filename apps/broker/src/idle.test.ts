import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '@queen-mq/broker';
import { freshDatabase, sleep } from '@queen-mq/testing';

// The deployable broker with nothing to do (issue 31: the idle floor): how
// often its main thread wakes, counted by the kernel (voluntary context
// switches: each time the event loop went to sleep and was woken). What
// wakes it while idle: the timer firer's poll (QUEEN_TIMER_POLL_MS, 200 ms),
// the schedule firer's sleep, and the event loop lag histogram's samples
// (metrics.ts EVENT_LOOP_SAMPLE_MS), whose 10 ms default alone woke it 100
// times a second. Linux only (/proc). Run `npm run build` first.

const main = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'main.js');
const children = new Set<ChildProcess>();
afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
});

/** Times the main thread of `pid` gave up the CPU to wait (its event loop going to sleep). */
function sleepsOf(pid: number): number {
  const status = readFileSync(`/proc/${pid}/task/${pid}/status`, 'utf8');
  return Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(status)![1]);
}

describe('apps/broker idle', () => {
  it.skipIf(!existsSync('/proc/self/task'))('an idle broker wakes its event loop at most 40 times a second', async () => {
    const port = await freePort();
    const child = spawn(process.execPath, [main], {
      env: { ...process.env, DATABASE_URL: await freshDatabase(), QUEEN_PORT: String(port), QUEEN_HOST: '127.0.0.1', QUEEN_LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.add(child);
    let out = '';
    child.stdout!.on('data', (d) => (out += d));
    const deadline = Date.now() + 60000;
    while (!/Queen broker listening/.test(out)) {
      if (child.exitCode !== null || Date.now() > deadline) throw new Error(`broker not listening: ${out}`);
      await sleep(50);
    }
    // Start-up work (connections, first passes) done.
    await sleep(3000);
    const before = sleepsOf(child.pid!);
    const started = Date.now();
    await sleep(5000);
    const perSecond = (sleepsOf(child.pid!) - before) / ((Date.now() - started) / 1000);
    console.log(`idle broker: its event loop woke ${perSecond.toFixed(1)} times a second`);
    // Measured 12-20 (the timer poll's five a second, each a timer and an
    // answer, and the lag histogram's ten); with the histogram's default 10 ms, 110.
    expect(perSecond).toBeLessThanOrEqual(40);
    child.kill('SIGTERM');
  }, 90000);
});
