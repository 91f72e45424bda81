import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queen, QueenError } from '@queen-mq/client';
import { eventually, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { kvClient } from './index.js';
import { kvBrokerFeature } from './broker.js';

// The client half: queen.kv (installed by importing this package), kvClient,
// and tx.kv inside queen.transaction(), against a real broker.

let b: TestBroker;
let queen: Queen;
beforeAll(async () => {
  b = await startTestBroker({ ...kvBrokerFeature() });
  queen = new Queen({ url: b.url, retries: 0 });
});
afterAll(async () => {
  await queen?.close();
  await b?.stop();
});

describe('KV client', () => {
  it('K1 K4 queen.kv: set, get (null when absent), incr with max, list, delete', async () => {
    const ns = uniqueName('kc');
    expect(queen.kv).toBeDefined();
    expect(await queen.kv.get(ns, 'nope')).toBeNull();
    const put = await queen.kv.set(ns, 'a', { n: 1 });
    expect(put).toMatchObject({ created: true, value: { n: 1 } });
    expect(await queen.kv.get(ns, 'a')).toMatchObject({ value: { n: 1 }, version: put.version });
    expect(await queen.kv.incr(ns, 'c', { by: 2 })).toMatchObject({ value: 2, applied: true });
    expect(await queen.kv.incr(ns, 'c', { max: 2 })).toMatchObject({ value: 2, applied: false });
    expect((await queen.kv.list(ns, { limit: 1 })).nextAfter).toBe('a');
    expect((await kvClient(queen).list(ns, { after: 'a' })).items.map((i) => i.key)).toEqual(['c']);
    expect(await queen.kv.delete(ns, 'a')).toBe(true);
    expect(await queen.kv.delete(ns, 'a')).toBe(false);
  });

  it('K1 a key with URL-reserved characters round-trips: the route table encodes each path part', async () => {
    const ns = uniqueName('kc.enc');
    const key = 'user/42?x=1#frag %2F ü';
    await queen.kv.set(ns, key, 'v');
    expect(await queen.kv.get(ns, key)).toMatchObject({ namespace: ns, key, value: 'v' });
    expect(await queen.kv.incr(ns, `${key}:n`)).toMatchObject({ value: 1, applied: true });
    expect((await queen.kv.list(ns, { prefix: 'user/' })).items.map((i) => i.key)).toEqual([key, `${key}:n`]);
    expect(await queen.kv.delete(ns, key)).toBe(true);
  });

  it('K2 a stale compare-and-set rejects with a typed VERSION_CONFLICT carrying currentVersion', async () => {
    const ns = uniqueName('kc2');
    const v1 = (await queen.kv.set(ns, 'k', 1)).version;
    const v2 = (await queen.kv.set(ns, 'k', 2, { expectedVersion: v1 })).version;
    const err = await queen.kv.set(ns, 'k', 3, { expectedVersion: v1 }).catch((e) => e);
    expect(err).toBeInstanceOf(QueenError);
    expect(err.code).toBe('VERSION_CONFLICT');
    expect(err.status).toBe(409);
    expect(err.extra.currentVersion).toBe(v2);
    const del = await queen.kv.delete(ns, 'k', { expectedVersion: v1 }).catch((e) => e);
    expect(del.code).toBe('VERSION_CONFLICT');
  });

  it('K8 tx.kv in queen.transaction(): requireApplied over max rejects with KV_MAX_EXCEEDED and commits nothing', async () => {
    const ns = uniqueName('kc8');
    const src = uniqueName('kc8src');
    const work = queen.queue(uniqueName('kc8work'));
    await queen.queue(src).push([{ payload: 1 }, { payload: 2 }]);
    const first = (await queen.queue(src).pop())!.messages[0]!;
    const ok = await queen.transaction().kv.incr(ns, 'budget', { max: 1, requireApplied: true }).push(work, { payload: 'job-1' }).ack(first).commit();
    expect(ok.success).toBe(true);
    expect(ok.kvResults).toEqual([{ op: 'incr', namespace: ns, key: 'budget', value: 1, version: expect.any(Number), applied: true, deleted: false }]);
    expect(ok.results.map((r) => r.type)).toEqual(['push', 'ack']);

    const second = (await queen.queue(src).pop())!.messages[0]!;
    const err = await queen
      .transaction()
      .kv.incr(ns, 'budget', { max: 1, requireApplied: true })
      .push(work, { payload: 'job-2' })
      .ack(second)
      .commit()
      .catch((e) => e);
    expect(err).toBeInstanceOf(QueenError);
    expect(err.code).toBe('KV_MAX_EXCEEDED');
    expect(err.extra.transactionId).toMatch(/^[0-9a-f-]{36}$/);
    expect((await queen.kv.get(ns, 'budget'))!.value).toBe(1);
    const drained = await work.pop({ batch: 10 });
    expect(drained!.messages.map((m) => m.data)).toEqual(['job-1']);

    // The rejected message is still leased to us: defer it with a timer and ack it, atomically.
    const deferred = await queen
      .transaction()
      .timer({ queue: src, delayMs: 0, payload: second.data, transactionId: `retry-${second.transactionId}-1` })
      .ack(second)
      .kv.set(ns, 'last-deferred', second.transactionId)
      .commit();
    expect(deferred.timerResults[0]).toMatchObject({ status: 'scheduled' });
    const back = await eventually(async () => (await queen.queue(src).pop())?.messages[0], 3000);
    expect(back.data).toBe(2);
    expect(back.transactionId).toBe(`retry-${second.transactionId}-1`);
    expect((await queen.kv.get(ns, 'last-deferred'))!.value).toBe(second.transactionId);
  });
});
