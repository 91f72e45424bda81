import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleep, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { kvBrokerFeature } from './broker.js';

// The `kv` array of POST /api/v1/transaction (PROTOCOL §5.7, §6) and the lock
// order of §4, on a broker composing the KV plugin.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker({ ...kvBrokerFeature() });
});
afterAll(async () => b?.stop());

const txn = (body: unknown) => b.http('POST', '/api/v1/transaction', body);
/**
 * As a client does (its retry rules): a 503 DB_UNAVAILABLE applied nothing and
 * is sent again. On a loaded machine 200 transactions at once can wait out the
 * pool's 5 s connection timeout; that is back-pressure, not a deadlock.
 */
async function txnRetrying(body: unknown) {
  for (let attempt = 1; ; attempt++) {
    const r = await txn(body);
    if (r.status !== 503 || r.body?.code !== 'DB_UNAVAILABLE' || attempt === 5) return r;
    await new Promise((done) => setTimeout(done, 200 * attempt));
  }
}
const push = (queue: string, items: Record<string, unknown>[], partition = 'Default') =>
  b.http('POST', '/api/v1/push', { items: items.map((i) => ({ queue, partition, ...i })) });
const kvRow = async (ns: string, key: string) =>
  (await b.sql.query('select value, version::float8 as version from queen.kv where namespace = $1 and key = $2', [ns, key])).rows[0] ?? null;
const head = async (queue: string, partition = 'Default') => {
  const r = await b.http('GET', `/api/v1/resources/queues/${queue}`);
  return r.status === 404 ? null : (r.body.partitions.find((p: any) => p.name === partition)?.headOffset ?? null);
};
// Backends flush their statistics when idle, at most once a second: wait that out before reading.
const deadlocks = async () => {
  await sleep(1100);
  return readDeadlocks();
};
const readDeadlocks = async () =>
  Number((await b.sql.query('select deadlocks from pg_stat_database where datname = current_database()')).rows[0].deadlocks);

describe('transaction kv', () => {
  it('K8 atomic with a transaction: a failing ack rolls back the kv set and the push', async () => {
    const ns = uniqueName('k8');
    const bq = uniqueName('k8b');
    const r = await txn({
      kv: [{ op: 'set', namespace: ns, key: 'k', value: 1 }],
      operations: [
        { type: 'push', items: [{ queue: bq, payload: 'B' }] },
        { type: 'ack', transactionId: 'nope', partitionId: '00000000-0000-4000-8000-000000000000' },
      ],
    });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ success: false, code: 'MESSAGE_NOT_FOUND', results: [] });
    expect(await kvRow(ns, 'k')).toBeNull();
    expect(await head(bq)).toBe('0');
  });

  it('K8 counter at max: requireApplied aborts with KV_MAX_EXCEEDED and changes nothing; without it applied:false and the push commits', async () => {
    const ns = uniqueName('k8m');
    const bq = uniqueName('k8mb');
    for (let i = 0; i < 3; i++) await b.http('POST', `/api/v1/kv/${ns}/c/incr`, {});
    const before = await kvRow(ns, 'c');
    const denied = await txn({
      kv: [{ op: 'incr', namespace: ns, key: 'c', max: 3, requireApplied: true }],
      operations: [{ type: 'push', items: [{ queue: bq, payload: 'B' }] }],
    });
    expect(denied.body).toMatchObject({ success: false, code: 'KV_MAX_EXCEEDED', results: [] });
    expect(await kvRow(ns, 'c')).toEqual(before);
    // The target queue is created before the main transaction (PROTOCOL §4); no message was written.
    expect(await head(bq)).toBe('0');

    const soft = await txn({
      kv: [
        { op: 'incr', namespace: ns, key: 'c', max: 3 },
        { op: 'set', namespace: ns, key: 'other', value: { ok: true } },
      ],
      operations: [{ type: 'push', items: [{ queue: bq, payload: 'B' }] }],
    });
    expect(soft.body.success).toBe(true);
    expect(soft.body.kvResults[0]).toEqual({ op: 'incr', namespace: ns, key: 'c', value: 3, version: before.version, applied: false, deleted: false });
    expect(soft.body.kvResults[1]).toMatchObject({ op: 'set', namespace: ns, key: 'other', value: { ok: true }, applied: true, deleted: false });
    expect(soft.body.kvResults[1].version).toBeGreaterThan(before.version);
    expect(soft.body.results[0]).toMatchObject({ type: 'push', status: 'queued' });
    expect(await head(bq)).toBe('1');
    const metrics = (await b.http('GET', '/metrics')).body as string;
    expect(Number(/^queen_kv_incr_denied_total (\d+)/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(2);
  });

  it('kv ops apply in array order after locking; a version conflict aborts with currentVersion; results carry every field', async () => {
    const ns = uniqueName('kord');
    const v1 = (await b.http('PUT', `/api/v1/kv/${ns}/a`, { value: 10 })).body.version;
    const ok = await txn({
      kv: [
        { op: 'incr', namespace: ns, key: 'a', by: 5 },
        { op: 'set', namespace: ns, key: 'b', value: 'x', expectedVersion: 0, ttlSeconds: 60 },
        { op: 'incr', namespace: ns, key: 'a', by: -1, max: 100 },
        { op: 'delete', namespace: ns, key: 'b' },
        { op: 'delete', namespace: ns, key: 'never' },
      ],
    });
    expect(ok.body.success).toBe(true);
    const [i1, s, i2, d, d2] = ok.body.kvResults;
    expect(i1).toMatchObject({ op: 'incr', value: 15, applied: true, deleted: false });
    expect(s).toMatchObject({ op: 'set', value: 'x', applied: true });
    expect(i2).toMatchObject({ op: 'incr', value: 14, applied: true });
    expect(d).toEqual({ op: 'delete', namespace: ns, key: 'b', value: null, version: null, applied: true, deleted: true });
    expect(d2).toMatchObject({ deleted: false });
    expect(i1.version).toBeGreaterThan(v1);
    expect(s.version).toBeGreaterThan(i1.version);
    expect(i2.version).toBeGreaterThan(s.version);

    const stale = await txn({
      kv: [
        { op: 'incr', namespace: ns, key: 'a' },
        { op: 'set', namespace: ns, key: 'a', value: 0, expectedVersion: v1 },
      ],
    });
    expect(stale.body).toMatchObject({ success: false, code: 'VERSION_CONFLICT', currentVersion: i2.version, results: [] });
    expect(await kvRow(ns, 'a')).toEqual({ value: 14, version: i2.version });
    await b.http('PUT', `/api/v1/kv/${ns}/t`, { value: 'text' });
    const mismatch = await txn({ kv: [{ op: 'incr', namespace: ns, key: 't' }] });
    expect(mismatch.body).toMatchObject({ success: false, code: 'KV_TYPE_MISMATCH' });
  });

  it('K11 lock order holds: 20 concurrent transactions over keys [a,b]/[b,a] and partitions [p1,p2]/[p2,p1], each acking one message', async () => {
    const ns = uniqueName('k11');
    const src = uniqueName('k11src');
    const out = uniqueName('k11out');
    await push(src, Array.from({ length: 20 }, (_, i) => ({ payload: i })), 'only');
    const popped = await b.http('GET', `/api/v1/pop/queue/${src}/partition/only?batch=20&autoAck=false`);
    const msgs = popped.body.messages;
    expect(msgs.length).toBe(20);
    const before = await deadlocks();
    const all = await Promise.all(
      msgs.map((m: any, i: number) => {
        const keys = i % 2 ? ['a', 'b'] : ['b', 'a'];
        const parts = i % 2 ? ['p1', 'p2'] : ['p2', 'p1'];
        return txn({
          kv: keys.map((key) => ({ op: 'incr', namespace: ns, key })),
          operations: [
            { type: 'push', items: parts.map((partition) => ({ queue: out, partition, payload: i })) },
            { type: 'ack', transactionId: m.transactionId, partitionId: m.partitionId },
          ],
        });
      }),
    );
    expect(all.map((r) => r.body.success)).toEqual(Array(20).fill(true));
    expect(await deadlocks()).toBe(before);
    expect((await kvRow(ns, 'a')).value).toBe(20);
    expect((await kvRow(ns, 'b')).value).toBe(20);
    expect(await head(out, 'p1')).toBe('20');
    expect(await head(out, 'p2')).toBe('20');
  });

  it('200 concurrent transactions mixing kv, timers, pushes and acks on overlapping keys and partitions → zero deadlocks', async () => {
    const ns = uniqueName('dl');
    const src = uniqueName('dlsrc');
    const out = uniqueName('dlout');
    const N = 200;
    // Sources on 4 partitions, popped by autoAck=false so every transaction acks one leased message.
    for (let p = 0; p < 4; p++) await push(src, Array.from({ length: N / 4 }, (_, i) => ({ payload: { p, i } })), `s${p}`);
    const msgs: any[] = [];
    for (let p = 0; p < 4; p++) msgs.push(...(await b.http('GET', `/api/v1/pop/queue/${src}/partition/s${p}?batch=${N / 4}`)).body.messages);
    expect(msgs.length).toBe(N);
    const keys = ['k0', 'k1', 'k2', 'k3', 'k4'];
    const parts = ['o0', 'o1', 'o2', 'o3'];
    const pick = <T>(list: T[], i: number, n: number) => Array.from({ length: n }, (_, j) => list[(i * 7 + j * 3) % list.length]!);
    const before = await deadlocks();
    const results = await Promise.all(
      msgs.map((m, i) => {
        const myKeys = [...new Set(pick(keys, i, 3))];
        if (i % 2) myKeys.reverse();
        const myParts = [...new Set(pick(parts, i, 3))];
        if (i % 3 === 0) myParts.reverse();
        return txnRetrying({
          kv: [
            ...myKeys.map((key) => ({ op: 'incr', namespace: ns, key })),
            ...(i % 5 === 0 ? [{ op: 'set', namespace: ns, key: `s${i % 3}`, value: i }] : []),
          ],
          timers: [
            { queue: out, partition: myParts[0], delayMs: 0, payload: { timer: i }, transactionId: `t-${i % 10}` },
            { queue: out, partition: myParts[myParts.length - 1], delayMs: 0, payload: { timer: i } },
          ],
          operations: [
            { type: 'push', items: myParts.map((partition) => ({ queue: out, partition, payload: { i } })) },
            { type: 'ack', transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId },
          ],
        });
      }),
    );
    const failures = results.filter((r) => r.status !== 200 || !r.body.success);
    expect(failures.map((r) => r.body)).toEqual([]);
    expect(await deadlocks()).toBe(before);
    const counts = await b.sql.query('select key, value from queen.kv where namespace = $1 and key like $2 order by key', [ns, 'k%']);
    const expected = new Map<string, number>();
    msgs.forEach((_, i) => new Set(pick(keys, i, 3)).forEach((k) => expected.set(k, (expected.get(k) ?? 0) + 1)));
    expect(counts.rows.map((r) => [r.key, r.value])).toEqual([...expected.entries()].sort());
    // Every source message acked exactly once.
    const cursors = await b.sql.query(
      `select sum(c.cursor_offset)::int as acked from queen.cursors c join queen.partitions p on p.id = c.partition_id where p.queue_name = $1`,
      [src],
    );
    expect(cursors.rows[0].acked).toBe(N);
  });

  it('X11 bad transaction kv → 400 VALIDATION_FAILED, nothing changed', async () => {
    const ns = uniqueName('x11tx');
    const cases: [unknown, string][] = [
      [[{ op: 'incr', namespace: ns, key: 'k', by: 1.5 }], 'body.kv[0].by'],
      [[{ op: 'set', namespace: ns, key: 'k', value: 1, ttlSeconds: 0 }], 'body.kv[0].ttlSeconds'],
      [[{ op: 'set', namespace: 'bad ns!', key: 'k', value: 1 }], 'body.kv[0].namespace'],
      [[{ op: 'set', namespace: ns, key: 'k' }], 'body.kv[0].value'],
      [[{ op: 'merge', namespace: ns, key: 'k' }], 'body.kv[0].op'],
    ];
    for (const [kv, field] of cases) {
      const r = await txn({ kv });
      expect(r.status, JSON.stringify(kv)).toBe(400);
      expect(r.body.code).toBe('VALIDATION_FAILED');
      expect(r.body.details.map((d: any) => d.field)).toContain(field);
    }
    expect(await kvRow(ns, 'k')).toBeNull();
  });
});
