import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { kvBrokerFeature } from './broker.js';

// PROTOCOL §1.1 "null means absent" on the KV routes and the transaction's
// kv array (the broker applies it to every route; the log and streams routes
// are covered by packages/broker/src/queen-client-compat.test.ts). A KV
// `value` of null is a value, not an absence.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker({ ...kvBrokerFeature() });
});
afterAll(async () => b?.stop());

const enc = encodeURIComponent;
const kv = (method: string, ns: string, key: string, body?: unknown, suffix = '') => b.http(method, `/api/v1/kv/${enc(ns)}/${enc(key)}${suffix}`, body);

describe('KV: null as absent', () => {
  it('PUT with ttlSeconds and expectedVersion null writes without expiry or compare-and-set; value null is stored', async () => {
    const ns = uniqueName('kvn');
    const put = await kv('PUT', ns, 'a', { value: null, ttlSeconds: null, expectedVersion: null });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ value: null, created: true, expiresAt: null });
    const again = await kv('PUT', ns, 'a', { value: 2, ttlSeconds: null, expectedVersion: null });
    expect(again.body).toMatchObject({ value: 2, created: false });
  });

  it('incr with by, max and ttlSeconds null adds 1 without a cap or expiry', async () => {
    const ns = uniqueName('kvi');
    for (const expected of [1, 2]) {
      const r = await kv('POST', ns, 'n', { by: null, max: null, ttlSeconds: null }, '/incr');
      expect([r.status, r.body.value, r.body.applied, r.body.expiresAt]).toEqual([200, expected, true, null]);
    }
  });

  it('DELETE ?expectedVersion=null and list ?limit=null read as absent', async () => {
    const ns = uniqueName('kvd');
    await kv('PUT', ns, 'x', { value: 1 });
    const list = await b.http('GET', `/api/v1/kv/${ns}?limit=null`);
    expect([list.status, list.body.items.map((i: any) => i.key)]).toEqual([200, ['x']]);
    const del = await kv('DELETE', ns, 'x', undefined, '?expectedVersion=null');
    expect([del.status, del.body.deleted]).toEqual([200, true]);
  });

  it('transaction kv ops with null optional fields apply', async () => {
    const ns = uniqueName('kvt');
    const r = await b.http('POST', '/api/v1/transaction', {
      operations: null,
      kv: [
        { op: 'set', namespace: ns, key: 's', value: { v: 1 }, ttlSeconds: null, expectedVersion: null },
        { op: 'incr', namespace: ns, key: 'c', by: null, max: null, ttlSeconds: null, requireApplied: null },
      ],
      timers: null,
    });
    expect([r.status, r.body.success]).toEqual([200, true]);
    expect(r.body.kvResults.map((x: any) => [x.op, x.value, x.applied])).toEqual([
      ['set', { v: 1 }, true],
      ['incr', 1, true],
    ]);
  });
});
