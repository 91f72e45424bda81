import { createServer, type Server } from 'node:http';
import { fileURLToPath } from 'node:url';
import { Agent, type Dispatcher } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { modulesLoadedBy } from '@queen-mq/testing';
import { isConnectionError } from './retry.js';
import { Transport } from './transport.js';

// The client's own HTTP path is node:http with a keep-alive Agent (undici is
// loaded only for a caller's dispatcher): what undici's Agent gave us must hold.

let server: Server;
let url: string;
const connections: number[] = [];
beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.url === '/slow') return void setTimeout(() => res.end('{"slow":true}'), 300);
    if (req.url === '/cut') {
      res.writeHead(200, { 'content-length': '100' });
      res.write('{"partial":');
      return void setTimeout(() => res.socket?.destroy(), 20);
    }
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ length: body.length, type: req.headers['content-type'] ?? null })));
  });
  server.on('connection', () => connections.push(Date.now()));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const transport = (dispatcher?: Dispatcher) => new Transport({ url, timeoutMs: 5000, retries: 0, baseMs: 10, maxMs: 10, dispatcher });

describe('client http path', () => {
  it('importing the client loads no undici module (~15 MB of a stream runner\'s RSS)', async () => {
    const loaded = await modulesLoadedBy('@queen-mq/client', fileURLToPath(new URL('../../..', import.meta.url)));
    expect(loaded.some((u) => u.includes('/client/dist/http-exchange.js'))).toBe(true);
    expect(loaded.filter((u) => u.includes('/node_modules/undici/'))).toEqual([]);
  });

  it('sequential calls share one kept-alive connection, bodies of any size go whole', async () => {
    const t = transport();
    const before = connections.length;
    try {
      const big = { s: 'é'.repeat(300_000) };
      for (let i = 0; i < 20; i++) expect(await t.send('POST', '/echo', { body: i % 2 ? big : { i } })).toMatchObject({ type: 'application/json' });
      expect(await t.send('POST', '/echo', { body: big })).toEqual({ length: JSON.stringify(big).length, type: 'application/json' });
      expect(connections.length - before).toBe(1);
    } finally {
      await t.close();
    }
  });

  it('close() lets a call in flight finish, then refuses new ones', async () => {
    const t = transport();
    const call = t.send('GET', '/slow');
    await new Promise((r) => setTimeout(r, 50));
    await t.close();
    await expect(call).resolves.toEqual({ slow: true });
    await expect(t.send('GET', '/echo')).rejects.toMatchObject({ code: 'UND_ERR_CLOSED' });
  });

  it('a connection cut in the middle of an answer is a connection error', async () => {
    const t = transport();
    try {
      const err = await t.send('GET', '/cut').catch((e: unknown) => e);
      expect(isConnectionError(err)).toBe(true);
    } finally {
      await t.close();
    }
  });

  it("a caller's undici dispatcher carries the calls", async () => {
    let dispatched = 0;
    class Counting extends Agent {
      dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
        dispatched++;
        return super.dispatch(options, handler);
      }
    }
    const agent = new Counting();
    const t = transport(agent);
    try {
      expect(await t.send('POST', '/echo', { body: { a: 1 } })).toEqual({ length: 7, type: 'application/json' });
      expect(dispatched).toBe(1);
    } finally {
      await t.close();
      await agent.close();
    }
  });
});
