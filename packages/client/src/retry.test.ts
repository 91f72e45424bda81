import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '@queen-mq/broker';
import { startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { Queen, QueenError } from './index.js';

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

/**
 * A tiny HTTP front of the real broker: the first `failures` requests get
 * 503 DB_UNAVAILABLE (what the broker answers when PostgreSQL is gone), every
 * later one is proxied. `seen` counts the requests that reached it.
 */
async function flakyProxy(failures: number, port = 0): Promise<{ url: string; seen: string[]; close(): Promise<void> }> {
  const seen: string[] = [];
  let left = failures;
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    seen.push(`${req.method} ${req.url}`);
    if (left > 0) {
      left--;
      res.writeHead(503, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'Database unavailable', code: 'DB_UNAVAILABLE' }));
      return;
    }
    const upstream = await fetch(b.url + req.url, {
      method: req.method,
      headers: { 'content-type': 'application/json' },
      body: chunks.length ? Buffer.concat(chunks) : undefined,
    });
    const text = await upstream.text();
    res.writeHead(upstream.status, { 'content-type': 'application/json' });
    res.end(text);
  });
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
  const actual = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${actual}`,
    seen,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

async function messageCount(queue: string): Promise<number> {
  const { rows } = await b.sql.query(`select count(*)::int as n from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1`, [queue]);
  return rows[0].n;
}

describe('client retries', () => {
  it('a push whose items all have transactionIds is retried through two 503 DB_UNAVAILABLE answers and succeeds', async () => {
    const proxy = await flakyProxy(2);
    const queen = new Queen({ url: proxy.url, retryBaseMs: 10 });
    try {
      const q = queen.queue(uniqueName('retry'));
      const out = await q.push([{ payload: 1, transactionId: 't1' }, { payload: 2, transactionId: 't2' }]);
      expect(out.map((r) => r.status)).toEqual(['queued', 'queued']);
      expect(proxy.seen).toEqual(['POST /api/v1/push', 'POST /api/v1/push', 'POST /api/v1/push']);
      expect(await messageCount(q.name)).toBe(2);
    } finally {
      await queen.close();
      await proxy.close();
    }
  });

  it('acks are retried through 503s (a repeated ack is idempotent)', async () => {
    const direct = new Queen({ url: b.url });
    const q = direct.queue(uniqueName('ackretry'));
    await q.push({ payload: 'x' });
    const popped = await q.pop();
    await direct.close();

    const proxy = await flakyProxy(2);
    const queen = new Queen({ url: proxy.url, retryBaseMs: 10 });
    try {
      const res = await queen.ack(popped!.messages[0]!);
      expect(res[0]).toMatchObject({ success: true, leaseReleased: true });
      expect(proxy.seen).toHaveLength(3);
    } finally {
      await queen.close();
      await proxy.close();
    }
  });

  it('a push without transactionIds is not retried after a 503: the typed error surfaces and nothing is written', async () => {
    const proxy = await flakyProxy(1);
    const queen = new Queen({ url: proxy.url, retryBaseMs: 10 });
    try {
      const q = queen.queue(uniqueName('noretry'));
      const err = (await q.push([{ payload: 1 }, { payload: 2, transactionId: 't2' }]).catch((e: unknown) => e)) as QueenError;
      expect(err).toBeInstanceOf(QueenError);
      expect(err.code).toBe('DB_UNAVAILABLE');
      expect(err.status).toBe(503);
      expect(proxy.seen).toEqual(['POST /api/v1/push']);
      expect(await messageCount(q.name)).toBe(0);
    } finally {
      await queen.close();
      await proxy.close();
    }
  });

  it('a pop is not retried once sent', async () => {
    const proxy = await flakyProxy(1);
    const queen = new Queen({ url: proxy.url, retryBaseMs: 10 });
    try {
      const err = (await queen.queue(uniqueName('poprt')).pop().catch((e: unknown) => e)) as QueenError;
      expect(err.code).toBe('DB_UNAVAILABLE');
      expect(proxy.seen).toHaveLength(1);
    } finally {
      await queen.close();
      await proxy.close();
    }
  });

  it('a connection refused before sending is retried even for a push without transactionIds', async () => {
    const port = await freePort();
    const queen = new Queen({ url: `http://127.0.0.1:${port}`, retries: 8, retryBaseMs: 50, retryMaxMs: 200 });
    let proxy: Awaited<ReturnType<typeof flakyProxy>> | undefined;
    try {
      const q = queen.queue(uniqueName('refused'));
      const pending = q.push({ payload: 'once' });
      await new Promise((r) => setTimeout(r, 150));
      proxy = await flakyProxy(0, port);
      const out = await pending;
      expect(out[0]!.status).toBe('queued');
      expect(proxy.seen).toEqual(['POST /api/v1/push']);
      expect(await messageCount(q.name)).toBe(1);
    } finally {
      await queen.close();
      await proxy?.close();
    }
  });

  it('retries give up after `retries` attempts and throw the last answer', async () => {
    const proxy = await flakyProxy(10);
    const queen = new Queen({ url: proxy.url, retries: 2, retryBaseMs: 5, failoverWaitMs: 0 });
    try {
      const err = (await queen.request('GET', '/health', { idempotent: true }).catch((e: unknown) => e)) as QueenError;
      expect(err.code).toBe('DB_UNAVAILABLE');
      expect(proxy.seen).toHaveLength(3);
    } finally {
      await queen.close();
      await proxy.close();
    }
  });

  it('an idempotent call waits out a failover: past `retries`, 503 DB_UNAVAILABLE answers are resent until failoverWaitMs, then it is stored once', async () => {
    const proxy = await flakyProxy(12);
    const queue = uniqueName('failover-wait');
    const queen = new Queen({ url: proxy.url, retries: 2, retryBaseMs: 5, retryMaxMs: 20, failoverWaitMs: 20000 });
    try {
      const [r] = await queen.queue(queue).push([{ payload: { n: 1 }, transactionId: 'fw-1' }]);
      expect(r!.status).toBe('queued');
      expect(proxy.seen).toHaveLength(13);
      expect(await messageCount(queue)).toBe(1);
      // Past failoverWaitMs the answer surfaces.
      const away = await flakyProxy(1000);
      const short = new Queen({ url: away.url, retries: 0, retryBaseMs: 5, retryMaxMs: 20, failoverWaitMs: 300 });
      const began = Date.now();
      const err = (await short.request('GET', '/health', { idempotent: true }).catch((e: unknown) => e)) as QueenError;
      expect(err.code).toBe('DB_UNAVAILABLE');
      expect(Date.now() - began).toBeGreaterThanOrEqual(300);
      await short.close();
      await away.close();
    } finally {
      await queen.close();
      await proxy.close();
    }
  });

  it('a push refused 429 QUEUE_FULL is sent again after the Retry-After wait and gets in once a consumer made room; past the retries it rejects', async () => {
    const q = uniqueName('full');
    await b.http('POST', '/api/v1/configure', { queue: q, options: { maxSize: 2 } });
    await b.http('POST', '/api/v1/push', { items: [{ queue: q, payload: 1 }, { queue: q, payload: 2 }] });
    const queen = new Queen({ url: b.url, retryBaseMs: 5 });
    const patient = new Queen({ url: b.url, retries: 1, retryBaseMs: 5, retryMaxMs: 50 });
    try {
      // Out of retries (one, waiting 50 ms: retryMaxMs bounds the asked second): the typed error, nothing written.
      const err = (await patient.queue(q).push({ n: 'x' }).catch((e: unknown) => e)) as QueenError;
      expect(err).toBeInstanceOf(QueenError);
      expect([err.code, err.status]).toEqual(['QUEUE_FULL', 429]);
      expect(await messageCount(q)).toBe(2);
      // A consumer takes one 300 ms from now; the push without a transactionId waits the asked second and gets in.
      const t0 = Date.now();
      setTimeout(() => void b.http('GET', `/api/v1/pop/queue/${q}?batch=1&autoAck=true`), 300);
      const out = await queen.queue(q).push({ n: 3 });
      expect(out[0]!.status).toBe('queued');
      expect(Date.now() - t0).toBeGreaterThanOrEqual(950);
      expect(await messageCount(q)).toBe(3);
    } finally {
      await queen.close();
      await patient.close();
    }
  });
});
