import { spawn, type ChildProcess } from 'node:child_process';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, sleep, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// What a parked long-poll pop costs the broker's heap (thousands of
// pops parked on as many queues took the broker from 83 to 190 MB RSS).
// The pops come from another process, each on its own connection, so the
// heap measured here is the broker's alone.
//
// The bound: Node's own HTTP server keeps about 4.3 KB of heap per request
// it holds open (the socket, its parser, IncomingMessage, ServerResponse,
// their stream states and listeners: measured with a bare
// http.createServer holding 10,000 requests), and fastify's Request and
// Reply some 0.3 KB. A parked pop then costs the broker 5.8 KB in all; it
// cost 8.8 KB when each was three suspended async frames with their
// promises, a Node timer, a pino child logger, a Map per queue and an array
// per line. 7 KB leaves room for noise and fails the old shape.
const MAX_HEAP_PER_PARKED_POP = 7 * 1024;
const POPS = 2000;

/** Opens `n` connections to `url`, each sending one long-poll pop on its own queue, then waits to be killed. */
const CLIENT = `
const net = require('node:net');
const [url, n, prefix] = process.argv.slice(1);
const { hostname, port } = new URL(url);
const sockets = [];
(async () => {
  for (let i = 0; i < Number(n); i++) {
    const s = net.connect(Number(port), hostname);
    s.on('error', () => {});
    s.on('data', () => {});
    s.write('GET /api/v1/pop/queue/' + prefix + i + '?wait=true&timeout=60000 HTTP/1.1\\r\\nHost: ' + hostname + '\\r\\nConnection: close\\r\\n\\r\\n');
    sockets.push(s);
    // In slices: thousands of connects at once overflow the listen backlog.
    if (i % 200 === 199) await new Promise((r) => setTimeout(r, 20));
  }
  process.stdout.write('sent\\n');
})();
setInterval(() => {}, 1 << 30);
`;

function parkFrom(url: string, n: number, prefix: string): ChildProcess {
  return spawn(process.execPath, ['-e', CLIENT, url, String(n), prefix], { stdio: ['ignore', 'pipe', 'inherit'] });
}

let b: TestBroker;
let gc: () => void;
beforeAll(async () => {
  setFlagsFromString('--expose_gc');
  gc = runInNewContext('gc') as () => void;
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

/** Heap in use after full collections (a second one frees what the first one's finalizers released). */
function heapUsed(): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

/** Parks `n` pops from another process; resolves once all are parked, with that process (kill it to let them go). */
async function park(n: number): Promise<ChildProcess> {
  const room = b.ctx.notifier.room;
  const before = room.parked;
  const child = parkFrom(b.url, n, `${uniqueName('mem')}-`);
  await eventually(async () => room.parked === before + n, 15000, 50);
  return child;
}

async function release(child: ChildProcess, parkedAfter: number): Promise<void> {
  child.kill();
  await eventually(async () => b.ctx.notifier.room.parked === parkedAfter, 10000, 50);
}

describe('parked pops: memory', () => {
  it(`a parked pop keeps less than ${MAX_HEAP_PER_PARKED_POP / 1024} KB of the broker's heap`, async () => {
    // Warm-up: compiled code, the pool's connections, Node's parser pool.
    await release(await park(300), 0);
    await sleep(200);
    const before = heapUsed();
    const clients = await park(POPS);
    const parked = heapUsed();
    await release(clients, 0);
    const perPop = (parked - before) / POPS;
    console.log(`${POPS} parked pops: ${(perPop / 1024).toFixed(2)} KB of heap each`);
    expect(perPop).toBeLessThan(MAX_HEAP_PER_PARKED_POP);
  }, 60000);
});
