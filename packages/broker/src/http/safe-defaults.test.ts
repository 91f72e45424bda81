import { request as httpRequest } from 'node:http';
import { connect, type Socket } from 'node:net';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleep, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { Authenticator, bearerToken } from './auth.js';
import { readConfig } from '../context/config.js';
import { registerOriginGuards } from './origin.js';

// Safe defaults (PROTOCOL §1.1/§1.2): what a web page the
// developer has open, or a slow or greedy client, can do to a broker. Over
// real HTTP with node:http, which lets a test send the Host, Origin and
// Sec-Fetch-Site headers a browser would.

const KEY = 'safe-defaults-key-0123456789';
const LISTED = 'http://localhost:3000';

let b: TestBroker; // every default
let cors: TestBroker; // auth on, one listed origin
let limits: TestBroker; // short request timeout, two connections

beforeAll(async () => {
  b = await startTestBroker();
  cors = await startTestBroker({
    databaseUrl: b.databaseUrl,
    config: { authEnabled: true, apiKeys: [{ key: KEY, level: 'admin', subject: 'ops' }], corsOrigins: [LISTED] },
  });
  limits = await startTestBroker({ databaseUrl: b.databaseUrl, config: { requestTimeoutMs: 300, maxConnections: 2 } });
});
afterAll(async () => {
  await limits?.stop();
  await cors?.stop();
  await b?.stop();
});

interface Raw {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: any;
}

/** One request with exactly these headers (node:http adds Host unless given, and nothing else). */
function raw(on: TestBroker, method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<Raw> {
  const url = new URL(on.url);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: url.hostname, port: url.port, method, path, headers: { ...(body !== undefined ? { 'content-length': String(Buffer.byteLength(body)) } : {}), ...headers } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (text += c));
      res.on('end', () => {
        let parsed: unknown = text;
        try {
          parsed = text ? JSON.parse(text) : undefined;
        } catch {
          /* not JSON */
        }
        resolve({ status: res.statusCode!, headers: res.headers, body: parsed });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function pushOne(queue: string, on: TestBroker = b) {
  const r = await on.http('POST', '/api/v1/push', { items: [{ queue, payload: { n: 1 } }] }, on === cors ? { authorization: `Bearer ${KEY}` } : {});
  expect(r.status).toBe(201);
}

/** Messages stored, and leases held, on a queue. */
async function footprint(queue: string) {
  const { rows } = await b.sql.query(
    `select (select count(*)::int from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1) as messages,
            (select count(*)::int from queen.cursors c join queen.partitions p on p.id = c.partition_id where p.queue_name = $1 and c.lease_id is not null) as leases,
            (select coalesce(sum(c.cursor_offset), 0)::int from queen.cursors c join queen.partitions p on p.id = c.partition_id where p.queue_name = $1) as acked`,
    [queue],
  );
  return rows[0] as { messages: number; leases: number; acked: number };
}

describe('binding and Host', () => {
  it('binds 127.0.0.1 unless QUEEN_HOST says otherwise', () => {
    expect(readConfig({}).host).toBe('127.0.0.1');
    expect(readConfig({ QUEEN_HOST: '0.0.0.0' }).host).toBe('0.0.0.0');
    expect((b.app.server.address() as { address: string }).address).toBe('127.0.0.1');
  });

  it('a loopback-bound broker answers loopback Host names only (DNS rebinding) and changes nothing otherwise', async () => {
    for (const host of ['localhost', 'localhost:6632', '127.0.0.1', `127.0.0.1:${new URL(b.url).port}`, '[::1]:6632', 'LOCALHOST:1']) {
      expect([host, (await raw(b, 'GET', '/health', { host })).status]).toEqual([host, 200]);
    }
    const queue = uniqueName('rebind');
    await pushOne(queue);
    for (const host of ['evil.example', 'evil.example:6632', '127.0.0.1.nip.io', 'localhost.evil.example']) {
      const r = await raw(b, 'GET', `/api/v1/pop/queue/${queue}?autoAck=true`, { host });
      expect([host, r.status, r.body?.code]).toEqual([host, 403, 'HOST_NOT_ALLOWED']);
    }
    expect(await footprint(queue)).toEqual({ messages: 1, leases: 0, acked: 0 });
  });

  it('a broker bound to every interface (QUEEN_HOST=0.0.0.0) serves any Host name', async () => {
    const open = await startTestBroker({ databaseUrl: b.databaseUrl, config: { host: '0.0.0.0' } });
    try {
      expect((await raw(open, 'GET', '/health', { host: 'queen.internal:6632' })).status).toBe(200);
    } finally {
      await open.stop();
    }
  });
});

describe('browsers', () => {
  it('no CORS headers and no OPTIONS route unless QUEEN_CORS_ORIGINS lists origins', async () => {
    const r = await raw(b, 'GET', '/health', { origin: LISTED, 'sec-fetch-site': 'same-origin' });
    expect(r.status).toBe(200);
    expect(r.headers['access-control-allow-origin']).toBeUndefined();
    const preflight = await raw(b, 'OPTIONS', '/api/v1/push', { origin: LISTED, 'access-control-request-method': 'POST' });
    expect(preflight.headers['access-control-allow-origin']).toBeUndefined();
    expect(preflight.status).not.toBe(204);
  });

  it('a cross-site GET (an <img> tag) cannot pop: 403 FORBIDDEN_ORIGIN, no lease, no ack', async () => {
    const queue = uniqueName('img');
    await pushOne(queue);
    const path = `/api/v1/pop/queue/${queue}?autoAck=true&batch=10`;
    for (const headers of [
      { 'sec-fetch-site': 'cross-site' }, // <img src=...>: no Origin at all
      { 'sec-fetch-site': 'same-site', origin: 'http://localhost:8080' }, // another local dev server
      { 'sec-fetch-site': 'cross-site', origin: 'https://evil.example' },
    ]) {
      const r = await raw(b, 'GET', path, headers);
      expect([JSON.stringify(headers), r.status, r.body?.code]).toEqual([JSON.stringify(headers), 403, 'FORBIDDEN_ORIGIN']);
    }
    expect(await footprint(queue)).toEqual({ messages: 1, leases: 0, acked: 0 });
    // Requests a browser marks as the user's own (typed URL, same origin) still work.
    expect((await raw(b, 'GET', '/health', { 'sec-fetch-site': 'none' })).status).toBe(200);
    const own = await raw(b, 'GET', path, { 'sec-fetch-site': 'same-origin', origin: b.url });
    expect([own.status, own.body.messages.length]).toEqual([200, 1]);
  });

  it('an older browser (Origin, no Sec-Fetch-Site) posting from another origin is refused too', async () => {
    const queue = uniqueName('oldbrowser');
    const body = JSON.stringify({ items: [{ queue, payload: 1 }] });
    const r = await raw(b, 'POST', '/api/v1/push', { origin: 'https://evil.example', 'content-type': 'application/json' }, body);
    expect([r.status, r.body.code]).toEqual([403, 'FORBIDDEN_ORIGIN']);
    expect((await footprint(queue)).messages).toBe(0);
  });

  it('a listed origin gets CORS headers and a preflight without a token; others get 403 and no CORS header', async () => {
    const preflight = await raw(cors, 'OPTIONS', '/api/v1/push', {
      origin: LISTED,
      'sec-fetch-site': 'same-site',
      'access-control-request-method': 'POST',
      'access-control-request-headers': 'authorization, content-type',
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers['access-control-allow-origin']).toBe(LISTED);
    expect(String(preflight.headers['access-control-allow-methods'])).toContain('POST');
    expect(String(preflight.headers['access-control-allow-headers']).toLowerCase()).toContain('authorization');
    expect(String(preflight.headers.vary)).toContain('Origin');

    const queue = uniqueName('cors');
    const body = JSON.stringify({ items: [{ queue, payload: 1 }] });
    const push = await raw(cors, 'POST', '/api/v1/push', { origin: LISTED, 'sec-fetch-site': 'same-site', 'content-type': 'application/json', authorization: `Bearer ${KEY}` }, body);
    expect(push.status).toBe(201);
    expect(push.headers['access-control-allow-origin']).toBe(LISTED);
    expect(push.headers['access-control-expose-headers']).toBe('X-Queen-Pop-Paused');
    // An error answer to a listed origin is readable by its page too.
    const denied = await raw(cors, 'POST', '/api/v1/push', { origin: LISTED, 'sec-fetch-site': 'same-site', 'content-type': 'application/json' }, body);
    expect([denied.status, denied.body.code, denied.headers['access-control-allow-origin']]).toEqual([401, 'AUTH_REQUIRED', LISTED]);

    for (const [method, headers] of [
      ['OPTIONS', { origin: 'https://evil.example', 'sec-fetch-site': 'cross-site', 'access-control-request-method': 'POST' }],
      ['OPTIONS', { origin: 'https://evil.example', 'access-control-request-method': 'POST' }],
      ['GET', { origin: 'https://evil.example', 'sec-fetch-site': 'cross-site' }],
    ] as const) {
      const r = await raw(cors, method, '/api/v1/resources/queues', { ...headers, authorization: `Bearer ${KEY}` });
      expect([method, r.status, r.body?.code, r.headers['access-control-allow-origin']]).toEqual([method, 403, 'FORBIDDEN_ORIGIN', undefined]);
    }
    expect((await footprint(queue)).messages).toBe(1);
  });

  it('QUEEN_CORS_ORIGINS must list origins; anything else is refused at start-up', () => {
    expect(readConfig({}).corsOrigins).toEqual([]);
    expect(readConfig({ QUEEN_CORS_ORIGINS: 'http://localhost:3000, https://console.example.com' }).corsOrigins).toEqual(['http://localhost:3000', 'https://console.example.com']);
    expect(() => readConfig({ QUEEN_CORS_ORIGINS: 'https://console.example.com/' })).toThrow(/QUEEN_CORS_ORIGINS/);
    expect(() => readConfig({ QUEEN_CORS_ORIGINS: 'console.example.com' })).toThrow(/QUEEN_CORS_ORIGINS/);
    // Any origin without auth would hand the broker to every page: refused, from the environment or from code.
    expect(() => readConfig({ QUEEN_CORS_ORIGINS: '*' })).toThrow(/QUEEN_AUTH_ENABLED/);
    expect(readConfig({ QUEEN_CORS_ORIGINS: '*', QUEEN_AUTH_ENABLED: 'true', QUEEN_API_KEYS: `[{"key":"${KEY}","level":"admin"}]` }).corsOrigins).toEqual(['*']);
    expect(() => registerOriginGuards(Fastify(), { host: '127.0.0.1', corsOrigins: ['*'], authEnabled: false })).toThrow(/QUEEN_AUTH_ENABLED/);
  });
});

describe('bodies are JSON', () => {
  it('text/plain, form and untyped bodies answer 415 UNSUPPORTED_MEDIA_TYPE and run nothing', async () => {
    const queue = uniqueName('ctype');
    const body = JSON.stringify({ items: [{ queue, payload: 1 }] });
    for (const type of ['text/plain', 'text/plain;charset=UTF-8', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/jsonp', undefined]) {
      const r = await raw(b, 'POST', '/api/v1/push', type === undefined ? {} : { 'content-type': type }, body);
      expect([type, r.status, r.body?.code]).toEqual([type, 415, 'UNSUPPORTED_MEDIA_TYPE']);
      expect(String(r.headers['content-type'])).toMatch(/^application\/json/);
    }
    // An empty text/plain POST (a form with no fields) does not run either.
    const empty = await raw(b, 'POST', '/api/v1/system/maintenance/pop', { 'content-type': 'text/plain' }, '');
    expect([empty.status, empty.body.code]).toEqual([415, 'UNSUPPORTED_MEDIA_TYPE']);
    expect((await footprint(queue)).messages).toBe(0);

    for (const type of ['application/json', 'Application/JSON; charset=utf-8', 'application/vnd.queen+json']) {
      expect([type, (await raw(b, 'POST', '/api/v1/push', { 'content-type': type }, body)).status]).toEqual([type, 201]);
    }
    // A request without a body needs no Content-Type.
    const extend = await raw(b, 'POST', '/api/v1/lease/0190a0a0-0000-7000-8000-000000000000/extend');
    expect(extend.status).toBe(200);
    expect((await footprint(queue)).messages).toBe(3);
  });
});

describe('HEAD', () => {
  it('HEAD on pop is no route: 404, and the cursor and leases are untouched', async () => {
    const queue = uniqueName('head');
    await pushOne(queue);
    for (const path of [`/api/v1/pop/queue/${queue}?autoAck=true`, `/api/v1/pop/queue/${queue}/partition/Default`, '/api/v1/resources/queues', '/health']) {
      expect([path, (await raw(b, 'HEAD', path)).status]).toEqual([path, 404]);
    }
    expect(await footprint(queue)).toEqual({ messages: 1, leases: 0, acked: 0 });
    const pop = await b.http('GET', `/api/v1/pop/queue/${queue}`);
    expect(pop.body.messages).toHaveLength(1);
  });
});

describe('auth parsing', () => {
  it('the Bearer header is parsed in linear time (a long blank run inside the token costs nothing)', async () => {
    const auth = new Authenticator({ apiKeys: [{ key: KEY, level: 'admin', subject: null }], roleReadOnly: 'read-only', roleReadWrite: 'read-write', roleAdmin: 'admin' });
    const header = `Bearer a${' '.repeat(50_000)}b`;
    const t0 = performance.now();
    await expect(auth.authenticate(header)).rejects.toMatchObject({ code: 'AUTH_INVALID' });
    expect(performance.now() - t0).toBeLessThan(100);
    expect(bearerToken(`bearer\t ${KEY} \t`)).toBe(KEY);
    expect([bearerToken(undefined), bearerToken('Bearer'), bearerToken('Bearer   '), bearerToken(`Bearer${KEY}`), bearerToken(`Basic ${KEY}`)]).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
    // Over HTTP: a 16 KB header of that shape is an ordinary 401.
    const r = await raw(cors, 'GET', '/api/v1/resources/queues', { authorization: `Bearer a${' '.repeat(15_000)}b` });
    expect([r.status, r.body.code]).toEqual([401, 'AUTH_INVALID']);
  });
});

describe('/ready', () => {
  it('answers from one database probe per second', async () => {
    const ready = await b.http('GET', '/ready');
    const t0 = Date.now();
    expect(ready.status).toBe(200);
    // The schema now looks wrong to a fresh probe; a cached answer does not see it yet.
    await b.sql.query(`update queen.schema_version set version = version + 1000 where owner = 'broker'`);
    try {
      const cached = await b.http('GET', '/ready');
      if (Date.now() - t0 < 900) expect(cached.status).toBe(200);
      await sleep(1100);
      const fresh = await b.http('GET', '/ready');
      expect([fresh.status, fresh.body.code]).toEqual([503, 'NOT_READY']);
    } finally {
      await b.sql.query(`update queen.schema_version set version = version - 1000 where owner = 'broker'`);
    }
    await sleep(1100);
    expect((await b.http('GET', '/ready')).status).toBe(200);
  });
});

describe('connections', () => {
  it('a client that does not finish its request within QUEEN_REQUEST_TIMEOUT_MS is answered 408 and cut off', async () => {
    expect(readConfig({}).requestTimeoutMs).toBe(30000);
    const url = new URL(limits.url);
    const socket = connect(Number(url.port), url.hostname);
    let received = '';
    socket.setEncoding('utf8');
    socket.on('data', (c) => (received += c));
    const closed = new Promise<number>((resolve) => socket.on('close', () => resolve(Date.now())));
    await new Promise((resolve) => socket.once('connect', resolve));
    const t0 = Date.now();
    socket.write(`POST /api/v1/push HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"items":`);
    const at = await Promise.race([closed, sleep(5000).then(() => -1)]);
    socket.destroy();
    expect(at).not.toBe(-1);
    expect(at - t0).toBeGreaterThanOrEqual(250);
    expect(received).toMatch(/^HTTP\/1\.1 408/);
  });

  it('connections beyond QUEEN_MAX_CONNECTIONS are closed on accept; a freed slot serves again', async () => {
    expect(readConfig({}).maxConnections).toBe(10000);
    const url = new URL(limits.url);
    const open = async () => {
      const socket = connect(Number(url.port), url.hostname);
      await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
      return socket;
    };
    /** Answers the status line of a GET /health on this socket, or 'closed'. */
    const health = (socket: Socket) =>
      new Promise<string>((resolve) => {
        let text = '';
        socket.setEncoding('utf8');
        socket.on('data', (c) => {
          text += c;
          if (text.includes('\r\n')) resolve(text.slice(0, text.indexOf('\r\n')));
        });
        socket.on('close', () => resolve('closed'));
        socket.on('error', () => resolve('closed'));
        socket.write('GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
      });
    const first = await open();
    const second = await open();
    expect(await health(first)).toBe('HTTP/1.1 200 OK');
    const third = await open();
    expect(await health(third)).toBe('closed');
    third.destroy();
    first.destroy();
    await sleep(200);
    const fourth = await open();
    expect(await health(fourth)).toBe('HTTP/1.1 200 OK');
    second.destroy();
    fourth.destroy();
  });
});
