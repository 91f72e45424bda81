import { getEventListeners } from 'node:events';
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Transport } from './transport.js';

// A caller's signal lives long (a runner's or consumer's stop signal) while
// requests come and go: each request must leave nothing on it. Combining it
// per request with AbortSignal.any left an entry per request on Node 20,
// kept until the signal aborts.

/** Signals Node tracks as derived from `signal` (AbortSignal.any); 0 where Node does not expose the set. */
function dependants(signal: AbortSignal): number {
  const key = Object.getOwnPropertySymbols(signal).find((s) => s.description === 'kDependantSignals');
  return key ? ((signal as any)[key]?.size ?? 0) : 0;
}

let server: Server;
let url: string;
beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.url === '/slow') return void setTimeout(() => res.end('{}'), 2000);
    res.writeHead(204).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const transport = (timeoutMs = 5000) => new Transport({ url, timeoutMs, retries: 0, baseMs: 10, maxMs: 10 });

describe('transport signals', () => {
  it('500 requests under one long-lived signal leave no listener and no derived signal on it', async () => {
    const t = transport();
    const stop = new AbortController();
    try {
      for (let i = 0; i < 500; i++) await t.send('GET', '/ok', { signal: stop.signal });
      expect(getEventListeners(stop.signal, 'abort')).toHaveLength(0);
      expect(dependants(stop.signal)).toBe(0);
    } finally {
      await t.close();
    }
  });

  it('the caller signal still cancels a request in flight, with its own reason', async () => {
    const t = transport();
    const stop = new AbortController();
    try {
      const call = t.send('GET', '/slow', { signal: stop.signal });
      setTimeout(() => stop.abort(new Error('stopping')), 100);
      await expect(call).rejects.toThrow('stopping');
      expect(getEventListeners(stop.signal, 'abort')).toHaveLength(0);
    } finally {
      await t.close();
    }
  });

  it('the per-attempt timeout still fires as a TimeoutError', async () => {
    const t = transport(200);
    try {
      const started = Date.now();
      await expect(t.send('GET', '/slow')).rejects.toMatchObject({ name: 'TimeoutError' });
      expect(Date.now() - started).toBeLessThan(1500);
    } finally {
      await t.close();
    }
  });
});
