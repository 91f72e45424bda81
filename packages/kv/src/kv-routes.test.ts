import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleep, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { kvBrokerFeature } from './broker.js';

// The KV routes of PROTOCOL §6 over real HTTP, on a broker that composes the
// KV plugin and its migrations the way apps/broker does.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker({ ...kvBrokerFeature() });
});
afterAll(async () => b?.stop());

const enc = encodeURIComponent;
const kv = (method: string, ns: string, key: string, body?: unknown, suffix = '') => b.http(method, `/api/v1/kv/${enc(ns)}/${enc(key)}${suffix}`, body);
const rows = async (ns: string) =>
  (await b.sql.query('select key, value, version::text as version, expires_at from queen.kv where namespace = $1 order by key', [ns])).rows;

describe('KV routes', () => {
  it('K1 round trip: PUT creates, GET reads, PUT again bumps the version, unknown key 404', async () => {
    const ns = uniqueName('k1');
    const put = await kv('PUT', ns, 'a', { value: { a: 1 } });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ namespace: ns, key: 'a', value: { a: 1 }, created: true, expiresAt: null });
    const v1 = put.body.version;
    expect(Number.isInteger(v1)).toBe(true);
    expect(put.body.updatedAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    const get = await kv('GET', ns, 'a');
    expect(get.status).toBe(200);
    expect(get.body).toMatchObject({ namespace: ns, key: 'a', value: { a: 1 }, version: v1, expiresAt: null });
    const again = await kv('PUT', ns, 'a', { value: [1, 'two', null] });
    expect(again.body.created).toBe(false);
    expect(again.body.version).toBeGreaterThan(v1);
    expect((await kv('GET', ns, 'a')).body.value).toEqual([1, 'two', null]);
    const missing = await kv('GET', ns, 'nope');
    expect(missing.status).toBe(404);
    expect(missing.body.code).toBe('KV_NOT_FOUND');
    // Any JSON value, null included, and keys with a slash or a percent sign.
    expect((await kv('PUT', ns, 'p/q%r', { value: null })).status).toBe(200);
    expect((await kv('GET', ns, 'p/q%r')).body).toMatchObject({ key: 'p/q%r', value: null });
    const long = 'ü'.repeat(512);
    expect((await kv('PUT', ns, long, { value: 'long' })).status).toBe(200);
    expect((await kv('GET', ns, long)).body).toMatchObject({ key: long, value: 'long' });
  });

  it('K2 compare-and-set: stale expectedVersion 409 with currentVersion; 0 = create-only; versions never repeat', async () => {
    const ns = uniqueName('k2');
    const v1 = (await kv('PUT', ns, 'k', { value: 1 })).body.version;
    const v2 = (await kv('PUT', ns, 'k', { value: 2, expectedVersion: v1 })).body.version;
    expect(v2).toBeGreaterThan(v1);
    const stale = await kv('PUT', ns, 'k', { value: 3, expectedVersion: v1 });
    expect(stale.status).toBe(409);
    expect(stale.body).toMatchObject({ code: 'VERSION_CONFLICT', currentVersion: v2 });
    expect((await kv('GET', ns, 'k')).body).toMatchObject({ value: 2, version: v2 });

    const createOnly = await kv('PUT', ns, 'k', { value: 9, expectedVersion: 0 });
    expect(createOnly.status).toBe(409);
    expect(createOnly.body.currentVersion).toBe(v2);
    const fresh = await kv('PUT', ns, 'new', { value: 9, expectedVersion: 0 });
    expect(fresh.status).toBe(200);
    expect(fresh.body.created).toBe(true);
    const absentCas = await kv('PUT', ns, 'absent', { value: 1, expectedVersion: 5 });
    expect(absentCas.status).toBe(409);
    expect(absentCas.body.currentVersion).toBe(0);
    expect((await kv('GET', ns, 'absent')).status).toBe(404);

    const staleDelete = await kv('DELETE', ns, 'k', undefined, `?expectedVersion=${v1}`);
    expect(staleDelete.status).toBe(409);
    expect(staleDelete.body.code).toBe('VERSION_CONFLICT');
    expect((await kv('GET', ns, 'k')).status).toBe(200);
    const del = await kv('DELETE', ns, 'k', undefined, `?expectedVersion=${v2}`);
    expect(del.body).toEqual({ deleted: true });
    expect(await kv('DELETE', ns, 'k')).toMatchObject({ status: 200, body: { deleted: false } });
    expect((await kv('DELETE', ns, 'k', undefined, `?expectedVersion=${v2}`)).status).toBe(409);
    const recreated = await kv('PUT', ns, 'k', { value: 'again' });
    expect(recreated.body.created).toBe(true);
    expect(recreated.body.version).toBeGreaterThan(v2);
  });

  it('K3 TTL: a key expires (GET 404, absent from the list); PUT without ttlSeconds clears an expiry', async () => {
    const ns = uniqueName('k3');
    const t0 = Date.now();
    const put = await kv('PUT', ns, 'short', { value: 1, ttlSeconds: 1 });
    const expiresAt = Date.parse(put.body.expiresAt);
    expect(expiresAt).toBeGreaterThan(t0 + 500);
    expect(expiresAt).toBeLessThan(Date.now() + 1500);
    await kv('PUT', ns, 'kept', { value: 1, ttlSeconds: 1 });
    const cleared = await kv('PUT', ns, 'kept', { value: 2 });
    expect(cleared.body.expiresAt).toBeNull();
    await sleep(1500);
    expect((await kv('GET', ns, 'short')).status).toBe(404);
    expect((await b.http('GET', `/api/v1/kv/${ns}`)).body.items.map((i: any) => i.key)).toEqual(['kept']);
    // Expired is absent for writes too: PUT creates again.
    expect((await kv('PUT', ns, 'short', { value: 3 })).body.created).toBe(true);
    await kv('PUT', ns, 'gone', { value: 1, ttlSeconds: 1 });
    await sleep(1100);
    // Maintenance purges expired rows (the kv task).
    const before = (await rows(ns)).length;
    const run = await b.http('POST', '/api/v1/system/maintenance/run', { tasks: ['kv'] });
    expect(run.status).toBe(200);
    expect(run.body.kv.expiredPurged).toBeGreaterThanOrEqual(1);
    expect((await rows(ns)).length).toBe(before - 1);
    expect((await rows(ns)).map((r) => r.key)).toEqual(['kept', 'short']);
  });

  it('K4 incr and admission: absent counts 0, by, max denies without writing, negative by', async () => {
    const ns = uniqueName('k4');
    const one = await kv('POST', ns, 'c', {}, '/incr');
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ value: 1, applied: true, expiresAt: null });
    const six = await kv('POST', ns, 'c', { by: 5 }, '/incr');
    expect(six.body).toMatchObject({ value: 6, applied: true });
    const denied = await kv('POST', ns, 'c', { by: 1, max: 6 }, '/incr');
    expect(denied.body).toEqual({ value: 6, applied: false, version: six.body.version, expiresAt: null });
    const four = await kv('POST', ns, 'c', { by: -2 }, '/incr');
    expect(four.body).toMatchObject({ value: 4, applied: true });
    expect(four.body.version).toBeGreaterThan(six.body.version);
    expect((await kv('GET', ns, 'c')).body.value).toBe(4);
    const deniedAbsent = await kv('POST', ns, 'absent', { by: 5, max: 3 }, '/incr');
    expect(deniedAbsent.body).toEqual({ value: 0, applied: false, version: null, expiresAt: null });
    expect((await kv('GET', ns, 'absent')).status).toBe(404);
  });

  it('K5 incr under concurrency: 50 concurrent incr max 10 → exactly 10 applied, final 10', async () => {
    const ns = uniqueName('k5');
    const all = await Promise.all(Array.from({ length: 50 }, () => kv('POST', ns, 'hot', { by: 1, max: 10 }, '/incr')));
    expect(all.every((r) => r.status === 200)).toBe(true);
    expect(all.filter((r) => r.body.applied).length).toBe(10);
    expect(all.filter((r) => !r.body.applied).length).toBe(40);
    expect((await kv('GET', ns, 'hot')).body.value).toBe(10);
    // The applied answers are exactly 1..10: each saw the one before it.
    expect(all.filter((r) => r.body.applied).map((r) => r.body.value).sort((x, y) => x - y)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  });

  it('K5 50 concurrent clients, 2000 increments of 1 against max 1000 → exactly 1000 applied, final 1000', async () => {
    const ns = uniqueName('k5big');
    let applied = 0;
    let attempts = 0;
    await Promise.all(
      Array.from({ length: 50 }, async () => {
        for (let i = 0; i < 40; i++) {
          attempts++;
          const r = await kv('POST', ns, 'budget', { by: 1, max: 1000 }, '/incr');
          expect(r.status).toBe(200);
          if (r.body.applied) applied++;
        }
      }),
    );
    expect(attempts).toBe(2000);
    expect(applied).toBe(1000);
    expect((await kv('GET', ns, 'budget')).body.value).toBe(1000);
  });

  it('K6 counter window: ttlSeconds only on create; after expiry incr starts at 1; non-integer → KV_TYPE_MISMATCH', async () => {
    const ns = uniqueName('k6');
    const t0 = Date.now();
    const first = await kv('POST', ns, 'w', { ttlSeconds: 2 }, '/incr');
    const exp = Date.parse(first.body.expiresAt);
    expect(Math.abs(exp - (t0 + 2000))).toBeLessThan(700);
    await sleep(1000);
    const second = await kv('POST', ns, 'w', { ttlSeconds: 2 }, '/incr');
    expect(second.body).toMatchObject({ value: 2, applied: true, expiresAt: first.body.expiresAt });
    await sleep(Math.max(0, exp - Date.now()) + 200);
    const restarted = await kv('POST', ns, 'w', { ttlSeconds: 2 }, '/incr');
    expect(restarted.body.value).toBe(1);
    expect(Date.parse(restarted.body.expiresAt)).toBeGreaterThan(exp);

    await kv('PUT', ns, 'text', { value: 'x' });
    const mismatch = await kv('POST', ns, 'text', {}, '/incr');
    expect(mismatch.status).toBe(409);
    expect(mismatch.body.code).toBe('KV_TYPE_MISMATCH');
    await kv('PUT', ns, 'frac', { value: 1.5 });
    expect((await kv('POST', ns, 'frac', {}, '/incr')).body.code).toBe('KV_TYPE_MISMATCH');
    await kv('PUT', ns, 'edge', { value: Number.MAX_SAFE_INTEGER });
    const over = await kv('POST', ns, 'edge', {}, '/incr');
    expect(over.status).toBe(409);
    expect(over.body.code).toBe('KV_TYPE_MISMATCH');
    expect((await kv('GET', ns, 'edge')).body.value).toBe(Number.MAX_SAFE_INTEGER);
    expect((await kv('GET', ns, 'text')).body.value).toBe('x');
  });

  it('K7 list: literal prefix, limit with nextAfter, after cursor, bytewise order', async () => {
    const ns = uniqueName('k7');
    for (const key of ['b', 'ab', 'a_2', 'a%1', 'B', 'é']) await kv('PUT', ns, key, { value: key });
    const list = (query: string) => b.http('GET', `/api/v1/kv/${ns}?${query}`);
    const pct = await list(`prefix=${enc('a%')}`);
    expect(pct.body.items.map((i: any) => i.key)).toEqual(['a%1']);
    expect(pct.body.nextAfter).toBeNull();
    const under = await list(`prefix=${enc('a_')}`);
    expect(under.body.items.map((i: any) => i.key)).toEqual(['a_2']);
    const all = await list('');
    // Bytewise: 'B' (0x42) < 'a%1' < 'a_2' < 'ab' < 'b' < 'é' (0xC3 0xA9).
    expect(all.body.items.map((i: any) => i.key)).toEqual(['B', 'a%1', 'a_2', 'ab', 'b', 'é']);
    expect(all.body.items[0]).toMatchObject({ key: 'B', value: 'B', expiresAt: null });
    const page1 = await list('limit=2');
    expect(page1.body.items.map((i: any) => i.key)).toEqual(['B', 'a%1']);
    expect(page1.body.nextAfter).toBe('a%1');
    const page2 = await list(`limit=2&after=${enc(page1.body.nextAfter)}`);
    expect(page2.body.items.map((i: any) => i.key)).toEqual(['a_2', 'ab']);
    const page3 = await list(`limit=2&after=${enc(page2.body.nextAfter)}`);
    expect(page3.body.items.map((i: any) => i.key)).toEqual(['b', 'é']);
    expect(page3.body.nextAfter).toBeNull();
    expect((await list('prefix=a&limit=2')).body).toMatchObject({ nextAfter: 'a_2' });
    expect((await b.http('GET', `/api/v1/kv/${uniqueName('empty')}`)).body).toEqual({ items: [], nextAfter: null });
  });

  it('K7 namespaces: bytewise order, paged with after and nextAfter', async () => {
    const base = uniqueName('nsl');
    const names = [`${base}.b`, `${base}.a`, `${base}.c`];
    for (const ns of names) for (const key of ['x', 'y']) await kv('PUT', ns, key, { value: 1 });
    const all: string[] = [];
    let after: string | null = `${base}.`;
    for (let pages = 0; after !== null && pages < 10; pages++) {
      const res = await b.http('GET', `/api/v1/kv?limit=2&after=${enc(after)}`);
      expect(res.status).toBe(200);
      all.push(...res.body.namespaces);
      after = res.body.nextAfter;
      if (!all.every((n) => n.startsWith(base))) break;
    }
    expect(all.filter((n) => n.startsWith(base))).toEqual([`${base}.a`, `${base}.b`, `${base}.c`]);
    const first = await b.http('GET', `/api/v1/kv?limit=1&after=${enc(`${base}.`)}`);
    expect(first.body).toEqual({ namespaces: [`${base}.a`], nextAfter: `${base}.a` });
    expect((await b.http('GET', '/api/v1/kv?limit=0')).body.code).toBe('VALIDATION_FAILED');
  });

  it('X11 bad KV input → 400 VALIDATION_FAILED naming the field, nothing changed', async () => {
    const ns = uniqueName('x11');
    await kv('PUT', ns, 'k', { value: 5 });
    const before = await rows(ns);
    const cases: [Promise<{ status: number; body: any }>, string][] = [
      [kv('POST', ns, 'k', { by: 1.5 }, '/incr'), 'body.by'],
      [kv('POST', ns, 'k', { by: 'one' }, '/incr'), 'body.by'],
      [kv('POST', ns, 'k', { max: 2 ** 60 }, '/incr'), 'body.max'],
      [kv('PUT', ns, 'k', { value: 1, ttlSeconds: 0 }), 'body.ttlSeconds'],
      [kv('PUT', ns, 'k', { value: 1, ttlSeconds: 31536001 }), 'body.ttlSeconds'],
      [kv('PUT', ns, 'k', { value: 1, expectedVersion: -1 }), 'body.expectedVersion'],
      [kv('PUT', 'bad ns!', 'k', { value: 1 }), 'params.namespace'],
      [kv('PUT', ns, 'k', {}), 'body.value'],
      [kv('PUT', ns, 'x'.repeat(513), { value: 1 }), 'params.key'],
      [kv('PUT', ns, 'tab\there', { value: 1 }), 'params.key'],
      [kv('DELETE', ns, 'k', undefined, '?expectedVersion=abc'), 'query.expectedVersion'],
      [b.http('GET', `/api/v1/kv/${ns}?limit=0`), 'query.limit'],
      [b.http('GET', `/api/v1/kv/${ns}?limit=1001`), 'query.limit'],
      [b.http('GET', `/api/v1/kv/${'n'.repeat(129)}`), 'params.namespace'],
    ];
    for (const [pending, field] of cases) {
      const r = await pending;
      expect(r.status, field).toBe(400);
      expect(r.body.code).toBe('VALIDATION_FAILED');
      expect(r.body.details.map((d: any) => d.field)).toContain(field);
    }
    const json = await b.http('PUT', `/api/v1/kv/${ns}/k`, '{"value":');
    expect(json.body.code).toBe('INVALID_JSON');
    expect(await rows(ns)).toEqual(before);
  });
});
