import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requestJson, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { FLAG_CACHE_MAX, encryptedQueues } from './encryption.js';
import { ClockCache } from '../db/clock-cache.js';
import { PartitionDirectory } from '../db/partitions.js';
import { setTransactionKv } from '../context/context.js';

// Caps over real HTTP against a real PostgreSQL: transaction
// arrays, the pop byte bound, paged state/get and paged listings; and the
// caches keyed by client-chosen names stay bounded.

const MAX_POP_BYTES = 24_000;
let b: TestBroker;
let kvCalls = 0;

beforeAll(async () => {
  b = await startTestBroker({ config: { maxPopBytes: MAX_POP_BYTES, maxPushItems: 50 } });
  // A stand-in for the KV feature (which the broker package cannot import):
  // counts what reaches it, so a refused transaction visibly applied nothing.
  setTransactionKv(b.ctx, async (_client, ops) => {
    kvCalls++;
    return ops.map(() => ({ success: true }));
  });
});
afterAll(async () => {
  await b?.stop();
});

const stored = async (queue: string) =>
  (await b.sql.query<{ n: number }>('select count(*)::int as n from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1', [queue])).rows[0]!.n;

describe('transaction caps', () => {
  it('kv over 1000, timers over 1000, acks over 10000, push items over QUEEN_MAX_PUSH_ITEMS → 400 VALIDATION_FAILED naming the field; nothing applied', async () => {
    const q = uniqueName('cap');
    const kv = Array.from({ length: 1001 }, (_, i) => ({ op: 'set', namespace: 'n', key: `k${i}`, value: i }));
    const timers = Array.from({ length: 1001 }, (_, i) => ({ queue: q, delayMs: 0, payload: i }));
    const acks = Array.from({ length: 10001 }, (_, i) => ({ type: 'ack', transactionId: `t${i}`, partitionId: '00000000-0000-4000-8000-000000000001' }));
    const push = [{ type: 'push', items: Array.from({ length: 30 }, (_, i) => ({ queue: q, payload: i })) }];
    const cases: [unknown, string][] = [
      [{ kv }, 'body.kv'],
      [{ timers }, 'body.timers'],
      [{ operations: acks }, 'body.operations'],
      [{ operations: [...push, ...push] }, 'body.operations'],
    ];
    for (const [body, field] of cases) {
      const r = await b.http('POST', '/api/v1/transaction', body);
      expect(r.status, field).toBe(400);
      expect(r.body.code).toBe('VALIDATION_FAILED');
      expect(r.body.details.map((d: any) => d.field)).toContain(field);
    }
    expect(kvCalls).toBe(0);
    expect(await stored(q)).toBe(0);
    expect((await b.sql.query('select count(*)::int as n from queen.log_timers where queue_name = $1', [q])).rows[0].n).toBe(0);

    // At the caps they pass.
    const ok = await b.http('POST', '/api/v1/transaction', { operations: push, kv: kv.slice(0, 1000) });
    expect(ok.status, JSON.stringify(ok.body).slice(0, 300)).toBe(200);
    expect(ok.body.success).toBe(true);
    expect(kvCalls).toBe(1);
    expect(await stored(q)).toBe(30);
  });
});

describe('QUEEN_MAX_POP_BYTES', () => {
  const big = (i: number) => ({ i, pad: 'x'.repeat(5000) });

  it('a pop answers at most the bound; the lease covers only what was delivered and the rest goes to the next pop', async () => {
    const q = uniqueName('bytes');
    const pushed = await b.http('POST', '/api/v1/push', { items: Array.from({ length: 20 }, (_, i) => ({ queue: q, payload: big(i) })) });
    expect(pushed.status).toBe(201);
    const res = await fetch(`${b.url}/api/v1/pop/queue/${q}?batch=20`);
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(MAX_POP_BYTES);
    const first = JSON.parse(text);
    const n = first.messages.length;
    expect(n).toBeGreaterThanOrEqual(2);
    expect(n).toBeLessThan(20);
    const { rows } = await b.sql.query(
      `select c.lease_last_offset from queen.cursors c join queen.partitions p on p.id = c.partition_id where p.queue_name = $1`,
      [q],
    );
    expect(rows[0].lease_last_offset).toBe(first.messages[n - 1].offset);
    // Acking what was delivered ends the lease (it ends where delivery ended),
    // and the next pop of the group starts right after it.
    const ack = await b.http('POST', '/api/v1/ack/batch', {
      acknowledgments: first.messages.map((m: any) => ({ transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId })),
    });
    expect(ack.body.every((r: any) => r.success)).toBe(true);
    expect((await b.sql.query(`select c.lease_id from queen.cursors c join queen.partitions p on p.id = c.partition_id where p.queue_name = $1`, [q])).rows[0].lease_id).toBeNull();
    const second = await b.http('GET', `/api/v1/pop/queue/${q}?batch=20`);
    expect(second.status).toBe(200);
    expect(second.body.messages[0].data.i).toBe(n);
  });

  it('small uncompressed payloads: a batch far under the bound comes whole, a large batch stops at the bound', async () => {
    const q = uniqueName('bytess');
    // QUEEN_MAX_PUSH_ITEMS is 50 on this broker.
    for (let k = 0; k < 6; k++) {
      const r = await b.http('POST', '/api/v1/push', { items: Array.from({ length: 50 }, (_, i) => ({ queue: q, payload: { i: k * 50 + i, s: '\u0001é'.repeat(10) } })) });
      expect(r.status).toBe(201);
    }
    const few = await b.http('GET', `/api/v1/pop/queue/${q}?batch=5&autoAck=true`);
    expect(few.body.messages).toHaveLength(5);
    const res = await fetch(`${b.url}/api/v1/pop/queue/${q}?batch=295&autoAck=true`);
    const text = await res.text();
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(MAX_POP_BYTES);
    const n = JSON.parse(text).messages.length;
    expect(n).toBeGreaterThan(5);
    expect(n).toBeLessThan(295);
  });

  it('a message larger than the bound is still delivered, alone', async () => {
    const q = uniqueName('bytes1');
    await b.http('POST', '/api/v1/push', { items: [{ queue: q, payload: 'y'.repeat(MAX_POP_BYTES * 2) }, { queue: q, payload: 'small' }] });
    const got = await b.http('GET', `/api/v1/pop/queue/${q}?batch=10&autoAck=true`);
    expect(got.status).toBe(200);
    expect(got.body.messages).toHaveLength(1);
    expect(got.body.messages[0].data).toHaveLength(MAX_POP_BYTES * 2);
    const next = await b.http('GET', `/api/v1/pop/queue/${q}?batch=10&autoAck=true`);
    expect(next.body.messages.map((m: any) => m.data)).toEqual(['small']);
  });

  it('the bound spans partitions: a queue-level pop over several partitions stays under it', async () => {
    const q = uniqueName('bytesp');
    await b.http('POST', '/api/v1/push', {
      items: Array.from({ length: 24 }, (_, i) => ({ queue: q, partition: `p${i % 4}`, payload: big(i) })),
    });
    const res = await fetch(`${b.url}/api/v1/pop/queue/${q}?batch=24&partitions=4&autoAck=true`);
    const text = await res.text();
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(MAX_POP_BYTES);
    let total = JSON.parse(text).messages.length;
    for (let i = 0; i < 30 && total < 24; i++) {
      const r = await b.http('GET', `/api/v1/pop/queue/${q}?batch=24&partitions=4&autoAck=true`);
      if (r.status === 200) total += r.body.messages.length;
    }
    expect(total).toBe(24); // autoAck moved cursors only over what was delivered
  });
});

describe('paged reads', () => {
  it('state/get answers at most `limit` rows and a next_after cursor; pages cover every row once', async () => {
    const reg = await b.http('POST', '/streams/v1/queries', { name: uniqueName('page'), source_queue: 'src', config_hash: 'h' });
    const pid = '00000000-0000-4000-8000-0000000000b1';
    const keys = Array.from({ length: 25 }, (_, i) => `w:${String(i).padStart(3, '0')}`);
    const c = await b.http('POST', '/streams/v1/cycle', {
      query_id: reg.body.query_id,
      partition_id: pid,
      ack: null,
      state_ops: keys.map((key) => ({ type: 'upsert', key, value: { windowEnd: 1 } })),
    });
    expect(c.body.success).toBe(true);
    const seen: string[] = [];
    let after: string | null = null;
    for (let page = 0; page < 10; page++) {
      const r: any = await b.http('POST', '/streams/v1/state/get', {
        query_id: reg.body.query_id,
        partition_id: pid,
        key_prefix: 'w:',
        limit: 10,
        ...(after ? { after } : {}),
      });
      expect(r.status).toBe(200);
      expect(r.body.rows.length).toBeLessThanOrEqual(10);
      seen.push(...r.body.rows.map((row: any) => row.key));
      after = r.body.next_after;
      if (after === null) break;
      expect(after).toBe(r.body.rows.at(-1).key);
    }
    expect(seen).toEqual(keys);
    const bad = await b.http('POST', '/streams/v1/state/get', { query_id: reg.body.query_id, partition_id: pid, limit: 10001 });
    expect(bad.status).toBe(400);
    expect(bad.body.details[0].field).toBe('body.limit');
  });

  it('queue, partition, consumer-group and stream-query listings page with limit/offset', async () => {
    const prefix = uniqueName('lst');
    const queues = [0, 1, 2].map((i) => `${prefix}-${i}`);
    await b.http('POST', '/api/v1/push', { items: queues.flatMap((queue) => [0, 1, 2].map((p) => ({ queue, partition: `p${p}`, payload: 1 }))) });
    for (const queue of queues) for (const g of ['ga', 'gb', 'gc']) await b.http('GET', `/api/v1/pop/queue/${queue}?consumerGroup=${prefix}-${g}&autoAck=true`);

    const all = await b.http('GET', '/api/v1/resources/queues?limit=10000');
    const names = all.body.queues.map((x: any) => x.name);
    const page = await b.http('GET', '/api/v1/resources/queues?limit=2&offset=1');
    expect(page.status).toBe(200);
    expect(page.body.queues.map((x: any) => x.name)).toEqual(names.slice(1, 3));
    expect(page.body.total).toBe(names.length);
    expect(page.body.pagination).toEqual({ limit: 2, offset: 1 });

    const detail = await b.http('GET', `/api/v1/resources/queues/${queues[0]}?limit=2&offset=1`);
    expect(detail.body.partitions.map((p: any) => p.name)).toEqual(['p1', 'p2']);
    expect(detail.body.partitionCount).toBe(3);

    const groups = await b.http('GET', '/api/v1/consumer-groups?limit=10000');
    const gnames = groups.body.map((g: any) => g.name);
    const gpage = await b.http('GET', '/api/v1/consumer-groups?limit=2&offset=1');
    expect(gpage.body.map((g: any) => g.name)).toEqual(gnames.slice(1, 3));
    expect(gpage.body[0].queues.length).toBeGreaterThan(0);

    for (const i of [0, 1, 2]) await b.http('POST', '/streams/v1/queries', { name: `${prefix}-s${i}`, source_queue: 'src', config_hash: 'h' });
    const sq = await b.http('GET', '/streams/v1/queries?limit=1&offset=1');
    expect(sq.body.queries).toHaveLength(1);
    expect(sq.body.total).toBeGreaterThanOrEqual(3);

    for (const path of ['/api/v1/resources/queues?limit=0', '/api/v1/consumer-groups?limit=10001', '/streams/v1/queries?offset=-1', `/api/v1/resources/queues/${queues[0]}?limit=x`]) {
      const r = await b.http('GET', path);
      expect(r.status, path).toBe(400);
      expect(r.body.code).toBe('VALIDATION_FAILED');
    }
    // Unpaged defaults still answer (first LIST_DEFAULT_LIMIT rows).
    expect((await requestJson(b.url, 'GET', '/api/v1/resources/queues')).body.pagination).toEqual({ limit: 1000, offset: 0 });
  });
});

describe('caches keyed by client-chosen names stay bounded', () => {
  it('the partition directory holds at most its bound while a client pushes to ever new partitions', async () => {
    const dir = new PartitionDirectory(b.ctx.db, 20);
    const q = uniqueName('lru');
    for (let round = 0; round < 5; round++) {
      const targets = Array.from({ length: 30 }, (_, i) => ({ queue: q, partition: `p${round}-${i}` }));
      const refs = await dir.ensure(targets);
      expect(refs.size).toBe(30); // a call still answers every target
      expect(dir.cachedCount).toBeLessThanOrEqual(20);
    }
    // The broker's own directory is bounded too.
    for (let i = 0; i < 3; i++) await b.http('POST', '/api/v1/push', { items: Array.from({ length: 50 }, (_, j) => ({ queue: q, partition: `x${i}-${j}`, payload: 1 })) });
    expect(b.ctx.partitions.cachedCount).toBeLessThanOrEqual(50_000);
  });

  it('the encryption flag cache is a ClockCache of FLAG_CACHE_MAX queues', async () => {
    const names = Array.from({ length: 200 }, (_, i) => uniqueName(`f${i}`));
    await encryptedQueues(b.ctx, names);
    const { flags } = b.ctx.encryption;
    expect(flags).toBeInstanceOf(ClockCache);
    expect(flags.max).toBe(FLAG_CACHE_MAX);
    expect(flags.size).toBeLessThanOrEqual(FLAG_CACHE_MAX);
  });
});
