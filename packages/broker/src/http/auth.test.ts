import { randomUUID } from 'node:crypto';
import { generateKeyPair, SignJWT, type JWTPayload } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { Authenticator } from './auth.js';
import { readConfig } from '../context/config.js';

const SECRET = 'auth-test-secret-0123456789abcdef0123456789';
const ISSUER = 'queen-tests';
const AUDIENCE = 'queen-broker';
const MAX_BODY = 64 * 1024;

/** The route → level table of PROTOCOL §2, written out independently of packages/protocol. */
const LEVELS: [method: string, url: string, level: 'public' | 'read-only' | 'read-write' | 'admin'][] = [
  ['GET', '/health', 'public'],
  ['GET', '/ready', 'public'],
  ['GET', '/metrics', 'read-only'],
  ['GET', '/metrics/prometheus', 'read-only'],
  ['GET', '/openapi.json', 'read-only'],
  ['POST', '/api/v1/configure', 'read-write'],
  ['GET', '/api/v1/resources/queues', 'read-only'],
  ['GET', '/api/v1/resources/queues/:queue', 'read-only'],
  ['DELETE', '/api/v1/resources/queues/:queue', 'admin'],
  ['POST', '/api/v1/push', 'read-write'],
  ['GET', '/api/v1/pop/queue/:queue', 'read-write'],
  ['GET', '/api/v1/pop/queue/:queue/partition/:partition', 'read-write'],
  ['POST', '/api/v1/ack', 'read-write'],
  ['POST', '/api/v1/ack/batch', 'read-write'],
  ['POST', '/api/v1/lease/:leaseId/extend', 'read-write'],
  ['POST', '/api/v1/transaction', 'read-write'],
  ['GET', '/api/v1/dlq', 'read-only'],
  ['POST', '/api/v1/dlq/requeue', 'admin'],
  ['POST', '/api/v1/dlq/delete', 'admin'],
  ['GET', '/api/v1/consumer-groups', 'read-only'],
  ['GET', '/api/v1/consumer-groups/:group', 'read-only'],
  ['DELETE', '/api/v1/consumer-groups/:group', 'admin'],
  ['DELETE', '/api/v1/consumer-groups/:group/queues/:queue', 'admin'],
  ['POST', '/api/v1/consumer-groups/:group/queues/:queue/seek', 'read-write'],
  ['POST', '/api/v1/consumer-groups/:group/queues/:queue/partitions/:partition/seek', 'read-write'],
  ['GET', '/api/v1/system/maintenance', 'admin'],
  ['POST', '/api/v1/system/maintenance/pop', 'admin'],
  ['POST', '/api/v1/system/maintenance/run', 'admin'],
  ['GET', '/api/v1/kv/:namespace', 'read-only'],
  ['GET', '/api/v1/kv/:namespace/:key', 'read-only'],
  ['PUT', '/api/v1/kv/:namespace/:key', 'read-write'],
  ['DELETE', '/api/v1/kv/:namespace/:key', 'read-write'],
  ['POST', '/api/v1/kv/:namespace/:key/incr', 'read-write'],
  ['POST', '/streams/v1/queries', 'read-write'],
  ['GET', '/streams/v1/queries', 'read-only'],
  ['POST', '/streams/v1/queries/drop', 'admin'],
  ['POST', '/streams/v1/cycle', 'read-write'],
  ['POST', '/streams/v1/state/get', 'read-only'],
];
const rank = { public: 0, 'read-only': 1, 'read-write': 2, admin: 3 } as const;

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** An HS256 JWT for the test broker; override any claim, or the key. */
async function jwt(claims: JWTPayload, opts: { secret?: string; iss?: string | null; aud?: string | null } = {}): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  const payload: JWTPayload = { iat: now, exp: now + 300, ...claims };
  if (opts.iss !== null) payload.iss = opts.iss ?? ISSUER;
  if (opts.aud !== null) payload.aud = opts.aud ?? AUDIENCE;
  return new SignJWT(payload).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).sign(new TextEncoder().encode(opts.secret ?? SECRET));
}

function concrete(url: string): string {
  return url
    .replace(':leaseId', randomUUID())
    .replace(':queue', uniqueName('nq'))
    .replace(':partition', 'p')
    .replace(':group', uniqueName('ng'))
    .replace(':namespace', 'authns')
    .replace(':key', uniqueName('k'));
}

/**
 * Calls every §2 route this broker registered with the given headers and
 * answers [route, status, code] triples. Bodies are `[]` (JSON, not an
 * object), so a route that gets past auth stops at validation instead of
 * changing state.
 */
async function sweep(b: TestBroker, headers: Record<string, string>) {
  const present = LEVELS.filter(([method, url]) => b.app.hasRoute({ method: method as 'GET', url }));
  return Promise.all(
    present.map(async ([method, url, level]) => {
      const res = await b.http(method, concrete(url), method === 'GET' || method === 'DELETE' ? undefined : [], headers);
      return { route: `${method} ${url}`, level, status: res.status, code: res.body?.code as string | undefined };
    }),
  );
}

/** Asserts the sweep answers exactly like a caller holding `granted` (null = no token). */
function expectLevel(results: Awaited<ReturnType<typeof sweep>>, granted: keyof typeof rank | null) {
  for (const r of results) {
    const allowed = r.level === 'public' || (granted !== null && rank[granted] >= rank[r.level]);
    const seen = `${r.route} → ${r.status} ${r.code ?? ''}`;
    if (allowed) {
      expect([401, 403], seen).not.toContain(r.status);
      expect(r.code, seen).not.toBe('ROUTE_NOT_FOUND');
    } else if (granted === null) {
      expect({ seen, code: r.code }).toEqual({ seen, code: 'AUTH_REQUIRED' });
    } else {
      expect({ seen, code: r.code, status: r.status }).toEqual({ seen, code: 'FORBIDDEN', status: 403 });
    }
  }
}

let b: TestBroker;
let readOnly: string;
let readWrite: string;
let admin: string;

beforeAll(async () => {
  b = await startTestBroker({
    config: {
      authEnabled: true,
      jwtSecret: SECRET,
      jwtIssuer: ISSUER,
      jwtAudience: AUDIENCE,
      maxBodyBytes: MAX_BODY,
      apiKeys: [
        { key: 'key-svc-a-0123456789', level: 'read-write', subject: 'svc-a' },
        { key: 'key-viewer-0123456789', level: 'read-only', subject: 'viewer' },
      ],
    },
  });
  [readOnly, readWrite, admin] = await Promise.all([
    jwt({ sub: 'ro-user', role: 'read-only' }),
    jwt({ sub: 'rw-user', role: 'read-write' }),
    jwt({ sub: 'root', role: 'admin' }),
  ]);
});
afterAll(async () => b?.stop());

/** Push one message as `headers` to a fresh queue, then pop it as admin; answers the pop body. */
async function pushThenPop(headers: Record<string, string>, item: Record<string, unknown> = {}) {
  const queue = uniqueName('aq');
  const push = await b.http('POST', '/api/v1/push', { items: [{ queue, payload: { n: 1 }, ...item }] }, headers);
  expect(push.status).toBe(201);
  const pop = await b.http('GET', `/api/v1/pop/queue/${queue}?batch=10`, undefined, bearer(admin));
  expect(pop.status).toBe(200);
  return { queue, pop: pop.body };
}

/** Dead-letters the first popped message (ack status `dlq`) and answers its DLQ entry. */
async function deadLetter(on: TestBroker, pop: { messages: { transactionId: string; partitionId: string; leaseId: string; queue: string }[] }, headers: Record<string, string>) {
  const m = pop.messages[0]!;
  const ack = await on.http('POST', '/api/v1/ack', { transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status: 'dlq', error: 'boom' }, headers);
  expect(ack.body[0]).toMatchObject({ success: true });
  const dlq = await on.http('GET', `/api/v1/dlq?queue=${m.queue}`, undefined, headers);
  expect([dlq.status, dlq.body.messages?.length]).toEqual([200, 1]);
  return dlq.body.messages[0];
}

async function messageCount(queue: string): Promise<number> {
  const { rows } = await b.sql.query(
    'select count(*)::int as n from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1',
    [queue],
  );
  return rows[0].n;
}

/**
 * One stream cycle as `headers`: an admin feeds the source; the caller
 * registers a query, pops the source, and commits a cycle that writes state,
 * pushes to the sink and acks. Answers what a later check needs.
 */
async function streamCycle(headers: Record<string, string>, sinkItem: Record<string, unknown> = {}) {
  const source = uniqueName('src');
  const sink = uniqueName('sink');
  expect((await b.http('POST', '/api/v1/push', { items: [{ queue: source, payload: { v: 1 } }] }, bearer(admin))).status).toBe(201);
  const reg = await b.http('POST', '/streams/v1/queries', { name: uniqueName('query'), source_queue: source, sink_queue: sink, config_hash: 'h1' }, headers);
  expect([reg.status < 300, reg.body.success]).toEqual([true, true]);
  const pop = await b.http('GET', `/api/v1/pop/queue/${source}`, undefined, headers);
  expect(pop.status).toBe(200);
  const m = pop.body.messages[0];
  const cycle = await b.http(
    'POST',
    '/streams/v1/cycle',
    {
      query_id: reg.body.query_id,
      partition_id: m.partitionId,
      state_ops: [{ type: 'upsert', key: 'k', value: { n: 1 } }],
      push_items: [{ queue: sink, payload: { out: 1 }, ...sinkItem }],
      ack: { transactionId: m.transactionId, leaseId: m.leaseId },
    },
    headers,
  );
  expect([cycle.status, cycle.body.success]).toEqual([200, true]);
  return { queryId: reg.body.query_id as string, partitionId: m.partitionId as string, sink };
}

describe('auth off', () => {
  let open: TestBroker;
  beforeAll(async () => {
    open = await startTestBroker();
  });
  afterAll(async () => open?.stop());

  it('A1 every route answers without a token and producerSub is null on pop and DLQ', async () => {
    expectLevel(await sweep(open, {}), 'admin');
    const queue = uniqueName('a1');
    const push = await open.http('POST', '/api/v1/push', { items: [{ queue, payload: 1, producerSub: 'mallory' }] });
    expect(push.status).toBe(201);
    const pop = await open.http('GET', `/api/v1/pop/queue/${queue}`);
    expect(pop.body.messages[0].producerSub).toBeNull();
    expect((await deadLetter(open, pop.body, {})).producerSub).toBeNull();
    const { rows } = await open.sql.query('select producer_sub from queen.messages');
    expect(rows).toEqual([{ producer_sub: null }]);
  });
});

describe('auth on', () => {
  it('A2 a protected route needs a Bearer token; health and ready do not', async () => {
    const queue = uniqueName('a2');
    const push = await b.http('POST', '/api/v1/push', { items: [{ queue, payload: 1 }] });
    expect(push.status).toBe(401);
    expect(push.body.code).toBe('AUTH_REQUIRED');
    // No CORS unless QUEEN_CORS_ORIGINS lists origins (safe-defaults.test.ts covers preflights without a token).
    expect(push.headers.get('access-control-allow-origin')).toBeNull();
    const basic = await b.http('POST', '/api/v1/push', { items: [{ queue, payload: 1 }] }, { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` });
    expect([basic.status, basic.body.code]).toEqual([401, 'AUTH_REQUIRED']);
    const dlq = await b.http('GET', '/api/v1/dlq');
    expect([dlq.status, dlq.body.code]).toEqual([401, 'AUTH_REQUIRED']);
    const empty = await b.http('GET', '/api/v1/resources/queues', undefined, { authorization: 'Bearer ' });
    expect([empty.status, empty.body.code]).toEqual([401, 'AUTH_REQUIRED']);
    expect(await messageCount(queue)).toBe(0);

    expect((await b.http('GET', '/health')).status).toBe(200);
    expect((await b.http('GET', '/ready')).status).toBe(200);
    // Route match comes before auth: an unknown route is a 404 even without a
    // token; HEAD and (without CORS) OPTIONS are served on no route.
    const unknown = await b.http('GET', '/api/v1/nope');
    expect([unknown.status, unknown.body.code]).toEqual([404, 'ROUTE_NOT_FOUND']);
    expect((await b.http('HEAD', '/api/v1/resources/queues')).status).toBe(404);
    const options = await b.http('OPTIONS', '/api/v1/push');
    expect([options.status, options.body.code]).toEqual([404, 'ROUTE_NOT_FOUND']);

    expectLevel(await sweep(b, {}), null);
  });

  it('A3 invalid tokens → 401 AUTH_INVALID and nothing changed', async () => {
    const now = Math.floor(Date.now() / 1000);
    const { privateKey } = await generateKeyPair('RS256');
    const rs256 = await new SignJWT({ sub: 'x', role: 'admin', iss: ISSUER, aud: AUDIENCE, exp: now + 300 }).setProtectedHeader({ alg: 'RS256' }).sign(privateKey);
    const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
    const algNone = `${b64({ alg: 'none', typ: 'JWT' })}.${b64({ sub: 'x', role: 'admin', iss: ISSUER, aud: AUDIENCE, exp: now + 300 })}.`;
    const valid = await jwt({ sub: 'x', role: 'admin' });
    const badSignature = valid.slice(0, valid.lastIndexOf('.') + 1) + Buffer.alloc(32, 7).toString('base64url');
    const bad: Record<string, string> = {
      wrongSecret: await jwt({ role: 'admin' }, { secret: 'another-secret-0123456789abcdef0123' }),
      expired: await jwt({ role: 'admin', exp: now - 60 }),
      // Without exp a leaked token would be good forever: exp is required.
      noExpiry: await jwt({ role: 'admin', exp: undefined }),
      notYetValid: await jwt({ role: 'admin', nbf: now + 120 }),
      algNone,
      rs256,
      badSignature,
      wrongIssuer: await jwt({ role: 'admin' }, { iss: 'someone-else' }),
      wrongAudience: await jwt({ role: 'admin' }, { aud: 'another-service' }),
      unknownApiKey: 'key-svc-a-0123456788',
      garbage: 'not a.jwt at-all',
    };
    const queue = uniqueName('a3');
    for (const [name, token] of Object.entries(bad)) {
      const res = await b.http('POST', '/api/v1/push', { items: [{ queue, payload: name }] }, bearer(token));
      expect({ name, status: res.status, code: res.body.code }).toEqual({ name, status: 401, code: 'AUTH_INVALID' });
      const list = await b.http('GET', '/api/v1/resources/queues', undefined, bearer(token));
      expect({ name, status: list.status }).toEqual({ name, status: 401 });
    }
    expect(await messageCount(queue)).toBe(0);
    expect((await b.http('GET', `/api/v1/resources/queues/${queue}`, undefined, bearer(admin))).status).toBe(404);

    // The 30 s skew: just-expired and nearly-valid tokens are still accepted.
    for (const claims of [{ exp: now - 10 }, { nbf: now + 10 }]) {
      const ok = await b.http('POST', '/api/v1/push', { items: [{ queue, payload: claims }] }, bearer(await jwt({ role: 'read-write', ...claims })));
      expect({ claims, status: ok.status }).toEqual({ claims, status: 201 });
    }
    expect(await messageCount(queue)).toBe(2);
  });

  it('A4 read-only reads, and every write is 403 FORBIDDEN with nothing changed', async () => {
    // State made by an admin, that the read-only caller must not move.
    const queue = uniqueName('a4');
    const group = uniqueName('g4');
    await b.http('POST', '/api/v1/push', { items: [{ queue, payload: 1 }, { queue, payload: 2 }] }, bearer(admin));
    const pop = await b.http('GET', `/api/v1/pop/queue/${queue}?consumerGroup=${group}&batch=1`, undefined, bearer(admin));
    expect(pop.status).toBe(200);
    const leased = pop.body.messages[0];
    const before = await b.sql.query('select cursor_offset, lease_id, lease_expires_at from queen.cursors where consumer_group = $1', [group]);

    for (const headers of [bearer(readOnly), bearer('key-viewer-0123456789')]) {
      for (const path of ['/api/v1/resources/queues', `/api/v1/resources/queues/${queue}`, '/api/v1/consumer-groups', `/api/v1/consumer-groups/${group}`, `/api/v1/dlq?queue=${queue}`, '/openapi.json']) {
        const res = await b.http('GET', path, undefined, headers);
        expect({ path, status: res.status }).toEqual({ path, status: 200 });
      }
      const writes = [
        await b.http('POST', '/api/v1/push', { items: [{ queue, payload: 3 }] }, headers),
        await b.http('GET', `/api/v1/pop/queue/${queue}?consumerGroup=${group}`, undefined, headers),
        await b.http('GET', `/api/v1/pop/queue/${queue}/partition/Default?consumerGroup=${uniqueName('g')}`, undefined, headers),
        await b.http('POST', '/api/v1/ack', { transactionId: leased.transactionId, partitionId: leased.partitionId, leaseId: leased.leaseId, consumerGroup: group }, headers),
        await b.http('POST', `/api/v1/lease/${leased.leaseId}/extend`, { seconds: 3600 }, headers),
        await b.http('POST', '/api/v1/configure', { queue, options: { retryLimit: 0 } }, headers),
        await b.http('POST', '/api/v1/configure', { queue: uniqueName('ro-new') }, headers),
        await b.http('POST', '/api/v1/transaction', { operations: [{ type: 'push', items: [{ queue, payload: 4 }] }] }, headers),
      ];
      for (const res of writes) expect([res.status, res.body.code]).toEqual([403, 'FORBIDDEN']);
      expectLevel(await sweep(b, headers), 'read-only');
    }

    const stream = await streamCycle(bearer(admin));
    for (const headers of [bearer(readOnly), bearer('key-viewer-0123456789')]) {
      expect((await b.http('GET', '/streams/v1/queries', undefined, headers)).status).toBe(200);
      const state = await b.http('POST', '/streams/v1/state/get', { query_id: stream.queryId, partition_id: stream.partitionId }, headers);
      expect([state.status, state.body.rows?.length]).toEqual([200, 1]);
      const name = uniqueName('ro-query');
      const reg = await b.http('POST', '/streams/v1/queries', { name, source_queue: queue, config_hash: 'h' }, headers);
      expect([reg.status, reg.body.code]).toEqual([403, 'FORBIDDEN']);
      const list = await b.http('GET', '/streams/v1/queries', undefined, bearer(admin));
      expect(list.body.queries.map((q: { name: string }) => q.name)).not.toContain(name);
    }

    const after = await b.sql.query('select cursor_offset, lease_id, lease_expires_at from queen.cursors where consumer_group = $1', [group]);
    expect(after.rows).toEqual(before.rows);
    const options = await b.sql.query(`select name from queen.queues where name like 'ro-new-%'`);
    expect(options.rows).toEqual([]);
    expect(await messageCount(queue)).toBe(2);
    const { rows } = await b.sql.query('select count(*)::int as n from queen.cursors c join queen.partitions p on p.id = c.partition_id where p.queue_name = $1', [queue]);
    expect(rows[0].n).toBe(1);
  });

  /** A stream cycle, then push → pop → extend → ack → reads, all as `headers`. */
  async function fullFlow(headers: Record<string, string>) {
    await streamCycle(headers);
    const queue = uniqueName('flow');
    const configure = await b.http('POST', '/api/v1/configure', { queue, options: { retryLimit: 5 } }, headers);
    expect([configure.status, configure.body.configured]).toEqual([200, true]);
    const push = await b.http('POST', '/api/v1/push', { items: [{ queue, payload: { a: 1 } }] }, headers);
    expect(push.status).toBe(201);
    const tx = await b.http('POST', '/api/v1/transaction', { operations: [{ type: 'push', items: [{ queue, payload: { a: 2 } }] }] }, headers);
    expect([tx.status, tx.body.success]).toEqual([200, true]);
    const pop = await b.http('GET', `/api/v1/pop/queue/${queue}`, undefined, headers);
    expect(pop.status).toBe(200);
    const m = pop.body.messages[0];
    const extend = await b.http('POST', `/api/v1/lease/${m.leaseId}/extend`, { seconds: 120 }, headers);
    expect(extend.body[0]).toMatchObject({ success: true });
    const ack = await b.http('POST', '/api/v1/ack', { transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId }, headers);
    expect(ack.body[0]).toMatchObject({ success: true });
    for (const path of [`/api/v1/resources/queues/${queue}`, '/api/v1/consumer-groups/__QUEUE_MODE__', `/api/v1/dlq?queue=${queue}`, '/openapi.json']) {
      expect({ path, status: (await b.http('GET', path, undefined, headers)).status }).toEqual({ path, status: 200 });
    }
    return queue;
  }

  it('A5 read-write pushes, pops, extends and acks; admin routes are 403', async () => {
    await fullFlow(bearer(readWrite));
    const queue = await fullFlow(bearer('key-svc-a-0123456789'));
    const del = await b.http('DELETE', `/api/v1/resources/queues/${queue}`, undefined, bearer(readWrite));
    expect([del.status, del.body.code]).toEqual([403, 'FORBIDDEN']);
    expect((await b.http('GET', `/api/v1/resources/queues/${queue}`, undefined, bearer(readWrite))).status).toBe(200);
    for (const [method, path] of [['GET', '/api/v1/system/maintenance'], ['POST', '/api/v1/system/maintenance/run'], ['DELETE', '/api/v1/consumer-groups/__QUEUE_MODE__']]) {
      const res = await b.http(method!, path!, method === 'POST' ? {} : undefined, bearer(readWrite));
      expect({ path, status: res.status, code: res.body.code }).toEqual({ path, status: 403, code: 'FORBIDDEN' });
    }
    expectLevel(await sweep(b, bearer(readWrite)), 'read-write');
  });

  it('A6 admin passes every route', async () => {
    const queue = await fullFlow(bearer(admin));
    expect((await b.http('GET', '/api/v1/system/maintenance', undefined, bearer(admin))).status).toBe(200);
    const del = await b.http('DELETE', `/api/v1/resources/queues/${queue}`, undefined, bearer(admin));
    expect(del.status).toBe(200);
    expect((await b.http('GET', `/api/v1/resources/queues/${queue}`, undefined, bearer(admin))).status).toBe(404);
    expectLevel(await sweep(b, bearer(admin)), 'admin');
  });

  it('A7 producerSub is the token subject (push, transaction, cycle sink push; pop and DLQ), never the body field', async () => {
    const alice = await jwt({ sub: 'alice', role: 'read-write' });
    const viaJwt = await pushThenPop(bearer(alice), { producerSub: 'mallory' });
    expect(viaJwt.pop.messages[0].producerSub).toBe('alice');
    expect((await deadLetter(b, viaJwt.pop, bearer(admin))).producerSub).toBe('alice');
    const viaKey = await pushThenPop(bearer('key-svc-a-0123456789'), { producerSub: 'mallory' });
    expect(viaKey.pop.messages[0].producerSub).toBe('svc-a');
    expect((await deadLetter(b, viaKey.pop, bearer(admin))).producerSub).toBe('svc-a');
    const txQueue = uniqueName('a7tx');
    const tx = await b.http('POST', '/api/v1/transaction', { operations: [{ type: 'push', items: [{ queue: txQueue, payload: 1, producerSub: 'mallory' }] }] }, bearer(alice));
    expect([tx.status, tx.body.success]).toEqual([200, true]);
    const txPop = await b.http('GET', `/api/v1/pop/queue/${txQueue}`, undefined, bearer(admin));
    expect(txPop.body.messages[0].producerSub).toBe('alice');
    const { sink } = await streamCycle(bearer(alice), { producerSub: 'mallory' });
    const sinkPop = await b.http('GET', `/api/v1/pop/queue/${sink}`, undefined, bearer(admin));
    expect(sinkPop.body.messages[0].producerSub).toBe('alice');
    const { rows } = await b.sql.query(
      'select p.queue_name, m.producer_sub from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = any($1) order by 2, 1',
      [[viaJwt.queue, viaKey.queue, sink]],
    );
    expect(rows).toEqual(
      [
        { queue_name: viaJwt.queue, producer_sub: 'alice' },
        { queue_name: sink, producer_sub: 'alice' },
        { queue_name: viaKey.queue, producer_sub: 'svc-a' },
      ].sort((x, y) => x.producer_sub.localeCompare(y.producer_sub) || x.queue_name.localeCompare(y.queue_name)),
    );
  });

  it('A8 highest role wins; unknown roles are 403; role names are renamable', async () => {
    expectLevel(await sweep(b, bearer(await jwt({ sub: 'x', roles: ['read-only', 'admin'] }))), 'admin');
    expectLevel(await sweep(b, bearer(await jwt({ sub: 'x', role: 'read-only', roles: ['read-write'] }))), 'read-write');
    const superuser = bearer(await jwt({ sub: 'x', role: 'superuser' }));
    const results = await sweep(b, superuser);
    for (const r of results.filter((r) => r.level !== 'public')) expect([r.route, r.status, r.code]).toEqual([r.route, 403, 'FORBIDDEN']);
    expect((await b.http('GET', '/health', undefined, superuser)).status).toBe(200);
  });

  it('A8 QUEEN_ROLE_ADMIN=ops: role "ops" is admin and "admin" is unrecognised', async () => {
    const env = readConfig({ QUEEN_AUTH_ENABLED: 'true', QUEEN_JWT_SECRET: SECRET, QUEEN_ROLE_ADMIN: 'ops' });
    const { authEnabled, jwtSecret, roleReadOnly, roleReadWrite, roleAdmin } = env;
    expect({ authEnabled, roleReadOnly, roleReadWrite, roleAdmin }).toEqual({ authEnabled: true, roleReadOnly: 'read-only', roleReadWrite: 'read-write', roleAdmin: 'ops' });
    const renamed = await startTestBroker({ databaseUrl: b.databaseUrl, config: { authEnabled, jwtSecret, roleReadOnly, roleReadWrite, roleAdmin } });
    try {
      expectLevel(await sweep(renamed, bearer(await jwt({ sub: 'x', role: 'ops' }, { iss: null, aud: null }))), 'admin');
      const old = await sweep(renamed, bearer(await jwt({ sub: 'x', role: 'admin' }, { iss: null, aud: null })));
      for (const r of old.filter((r) => r.level !== 'public')) expect([r.route, r.status, r.code]).toEqual([r.route, 403, 'FORBIDDEN']);
    } finally {
      await renamed.stop();
    }
  });

  it('A9 auth is decided before body size and JSON parsing', async () => {
    const malformed = await b.http('POST', '/api/v1/push', '{"items":[');
    expect([malformed.status, malformed.body.code]).toEqual([401, 'AUTH_REQUIRED']);
    const queue = uniqueName('a9');
    const oversized = JSON.stringify({ items: [{ queue, payload: 'x'.repeat(MAX_BODY + 1024) }] });
    const denied = await b.http('POST', '/api/v1/push', oversized, bearer(readOnly));
    expect([denied.status, denied.body.code]).toEqual([403, 'FORBIDDEN']);
    // The same bodies with enough rights reach the later steps.
    const tooLarge = await b.http('POST', '/api/v1/push', oversized, bearer(readWrite));
    expect([tooLarge.status, tooLarge.body.code]).toEqual([413, 'PAYLOAD_TOO_LARGE']);
    const badJson = await b.http('POST', '/api/v1/push', '{"items":[', bearer(readWrite));
    expect([badJson.status, badJson.body.code]).toEqual([400, 'INVALID_JSON']);
    expect(await messageCount(queue)).toBe(0);
  });
});

describe('auth config', () => {
  it('A2 auth settings are read from the environment and checked at startup', () => {
    const env = readConfig({ QUEEN_API_KEYS: '[{"key":"k1","level":"admin","subject":"ops"},{"key":"k2","level":"read-only"}]' });
    expect(env.apiKeys).toEqual([
      { key: 'k1', level: 'admin', subject: 'ops' },
      { key: 'k2', level: 'read-only', subject: null },
    ]);
    expect(env.authEnabled).toBe(false);
    expect(() => readConfig({ QUEEN_API_KEYS: '[{"key":"k1","level":"root"}]' })).toThrow(/level/);
    expect(() => readConfig({ QUEEN_API_KEYS: '{"key":"k1"}' })).toThrow(/JSON array/);
    expect(() => readConfig({ QUEEN_AUTH_ENABLED: 'yes' })).toThrow(/QUEEN_AUTH_ENABLED/);
    expect(() => readConfig({ QUEEN_AUTH_ENABLED: 'true' })).toThrow(/QUEEN_JWT_SECRET or QUEEN_API_KEYS/);
    expect(readConfig({ QUEEN_AUTH_ENABLED: '1', QUEEN_API_KEYS: '[{"key":"k","level":"admin"}]' }).authEnabled).toBe(true);
  });

  it('A2 a JWT secret shorter than 32 bytes is refused at start-up, from the environment or from code', () => {
    const short = 'x'.repeat(31);
    expect(() => readConfig({ QUEEN_AUTH_ENABLED: 'true', QUEEN_JWT_SECRET: short })).toThrow(/QUEEN_JWT_SECRET must be at least 32 bytes/);
    expect(readConfig({ QUEEN_AUTH_ENABLED: 'true', QUEEN_JWT_SECRET: 'x'.repeat(32) }).jwtSecret).toHaveLength(32);
    const roles = { roleReadOnly: 'read-only', roleReadWrite: 'read-write', roleAdmin: 'admin' };
    expect(() => new Authenticator({ jwtSecret: short, ...roles })).toThrow(/at least 32 bytes/);
    // 16 two-byte characters are 32 bytes: the limit counts bytes, as HMAC does.
    expect(() => new Authenticator({ jwtSecret: 'é'.repeat(16), ...roles })).not.toThrow();
  });
});
