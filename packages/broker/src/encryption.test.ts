import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, sleep, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { readConfig } from './config.js';
import { PayloadCipher } from './encryption.js';

// Encryption at rest (PROTOCOL §5.1 encryptionEnabled, scenario B46) over
// real HTTP on a real PostgreSQL: every write path into an encrypted queue
// stores only ciphertext; pop and the DLQ listing answer plaintext.

const KEY = '0f'.repeat(32);
let b: TestBroker; // holds KEY
let plain: TestBroker; // same database, no key

beforeAll(async () => {
  b = await startTestBroker({ config: { encryptionKey: KEY } });
  plain = await startTestBroker({ databaseUrl: b.databaseUrl, config: { encryptionKey: undefined } });
});
afterAll(async () => {
  await plain?.stop();
  await b?.stop();
});

const configure = (queue: string, options: Record<string, unknown>, broker = b) => broker.http('POST', '/api/v1/configure', { queue, options });
const pop = (queue: string, params = '', broker = b) => broker.http('GET', `/api/v1/pop/queue/${encodeURIComponent(queue)}?${params}`);
const stored = async (queue: string) =>
  (
    await b.sql.query<{ payload: unknown; encrypted: Buffer | null; transaction_id: string }>(
      `select m.payload, m.encrypted, coalesce(m.transaction_id, m.id::text) as transaction_id from queen.messages m join queen.partitions p on p.id = m.partition_id
        where p.queue_name = $1 order by m.partition_id, m.msg_offset`,
      [queue],
    )
  ).rows;

/** A marker that must never appear in the stored bytes. */
const secret = (tag: string) => ({ secret: `TOP-SECRET-${tag}`, n: 42 });

function expectCiphertextOnly(rows: { payload: unknown; encrypted: Buffer | null }[], marker: string) {
  expect(rows.length).toBeGreaterThan(0);
  for (const r of rows) {
    expect(r.payload).toBeNull();
    expect(r.encrypted).toBeInstanceOf(Buffer);
    // 12-byte IV + at least one byte + 16-byte tag.
    expect(r.encrypted!.length).toBeGreaterThan(28);
    expect(r.encrypted!.includes(Buffer.from(marker))).toBe(false);
    expect(r.encrypted!.includes(Buffer.from('TOP-SECRET'))).toBe(false);
  }
}

describe('encryption at rest', () => {
  it('B46 push into an encrypted queue stores ciphertext only; pop and DLQ return plaintext', async () => {
    const q = uniqueName('b46');
    const c = await configure(q, { encryptionEnabled: true, retryLimit: 0 });
    expect(c.status).toBe(200);
    expect(c.body.options.encryptionEnabled).toBe(true);

    const pushed = await b.http('POST', '/api/v1/push', { items: [{ queue: q, payload: secret('push') }, { queue: q, payload: secret('push2') }] });
    expect(pushed.status).toBe(201);
    expectCiphertextOnly(await stored(q), 'TOP-SECRET-push');

    const got = await pop(q, 'batch=10');
    expect(got.status).toBe(200);
    expect(got.body.messages.map((m: any) => m.data)).toEqual([secret('push'), secret('push2')]);

    const [m] = got.body.messages;
    const dead = await b.http('POST', '/api/v1/ack', { transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status: 'dlq', error: 'x' });
    expect(dead.status).toBe(200);
    const dlq = await b.http('GET', `/api/v1/dlq?queue=${q}`);
    expect(dlq.status).toBe(200);
    expect(dlq.body.total).toBe(1);
    expect(dlq.body.messages[0].data).toEqual(secret('push'));
  });

  it('B46 transaction push, timer and stream cycle sink push into an encrypted queue store ciphertext only', async () => {
    const q = uniqueName('b46t');
    expect((await configure(q, { encryptionEnabled: true })).status).toBe(200);

    const txn = await b.http('POST', '/api/v1/transaction', {
      operations: [{ type: 'push', items: [{ queue: q, payload: secret('txn'), transactionId: 'txn-1' }] }],
      timers: [
        { queue: q, delayMs: 0, payload: secret('timer'), transactionId: 'timer-1' },
        { queue: q, delayMs: 600000, payload: secret('later'), transactionId: 'timer-later' },
      ],
    });
    expect(txn.status).toBe(200);
    expect(txn.body.success).toBe(true);
    // A pending timer row holds ciphertext too.
    const timerRows = (await b.sql.query(`select payload, encrypted from queen.log_timers where queue_name = $1 and transaction_id = 'timer-later'`, [q])).rows;
    expect(timerRows).toHaveLength(1);
    expectCiphertextOnly(timerRows, 'TOP-SECRET-later');

    const { body: reg } = await b.http('POST', '/streams/v1/queries', { name: uniqueName('encq'), source_queue: 'src', config_hash: 'h' });
    const cycle = await b.http('POST', '/streams/v1/cycle', {
      query_id: reg.query_id,
      partition_id: '00000000-0000-4000-8000-000000000046',
      ack: null,
      push_items: [{ queue: q, payload: secret('cycle'), transactionId: 'cycle-1' }],
    });
    expect(cycle.status, JSON.stringify(cycle.body)).toBe(200);
    expect(cycle.body.success).toBe(true);

    const rows = await eventually(async () => {
      const r = await stored(q);
      return r.length === 3 && r;
    }, 10000);
    expect(rows.map((r) => r.transaction_id).sort()).toEqual(['cycle-1', 'timer-1', 'txn-1']);
    expectCiphertextOnly(rows, 'TOP-SECRET');

    const got = await pop(q, 'batch=10');
    expect(got.status).toBe(200);
    const byTxn = Object.fromEntries(got.body.messages.map((m: any) => [m.transactionId, m.data]));
    expect(byTxn).toEqual({ 'txn-1': secret('txn'), 'timer-1': secret('timer'), 'cycle-1': secret('cycle') });
  });

  it('B46 a queue without the option stores plaintext', async () => {
    const q = uniqueName('b46p');
    await b.http('POST', '/api/v1/push', { items: [{ queue: q, payload: secret('plain') }] });
    const [row] = await stored(q);
    expect(row!.encrypted).toBeNull();
    expect(row!.payload).toEqual(secret('plain'));
    expect((await pop(q)).body.messages[0].data).toEqual(secret('plain'));
  });

  it('B46 turning the option off again: new pushes are plaintext, old ones still decrypt', async () => {
    const q = uniqueName('b46o');
    await configure(q, { encryptionEnabled: true });
    await b.http('POST', '/api/v1/push', { items: [{ queue: q, payload: secret('on') }] });
    expect((await configure(q, { encryptionEnabled: false })).status).toBe(200);
    await b.http('POST', '/api/v1/push', { items: [{ queue: q, payload: secret('off') }] });
    const rows = await stored(q);
    expect(rows[0]!.payload).toBeNull();
    expect(rows[1]!.payload).toEqual(secret('off'));
    expect((await pop(q, 'batch=10')).body.messages.map((m: any) => m.data)).toEqual([secret('on'), secret('off')]);
  });

  it('B46 without a key configure → 400 naming body.options.encryptionEnabled and options unchanged', async () => {
    const q = uniqueName('b46k');
    const none = await configure(q, { encryptionEnabled: true }, plain);
    expect(none.status).toBe(400);
    expect(none.body.code).toBe('VALIDATION_FAILED');
    expect(none.body.details[0].field).toBe('body.options.encryptionEnabled');
    expect((await plain.http('GET', `/api/v1/resources/queues/${q}`)).status).toBe(404);

    expect((await configure(q, { leaseTime: 4 }, plain)).status).toBe(200);
    const again = await configure(q, { encryptionEnabled: true, leaseTime: 9 }, plain);
    expect(again.status).toBe(400);
    const { rows } = await b.sql.query('select options from queen.queues where name = $1', [q]);
    expect(rows[0].options).toMatchObject({ leaseTime: 4, encryptionEnabled: false });
  });

  it('B46 a broker without the key (or with a wrong one) answers data null, never a 500', async () => {
    const q = uniqueName('b46w');
    await configure(q, { encryptionEnabled: true });
    await b.http('POST', '/api/v1/push', { items: [{ queue: q, payload: secret('w1') }, { queue: q, payload: secret('w2') }] });
    const got = await pop(q, 'batch=10', plain);
    expect(got.status).toBe(200);
    expect(got.body.messages.map((m: any) => m.data)).toEqual([null, null]);

    const wrong = await startTestBroker({ databaseUrl: b.databaseUrl, config: { encryptionKey: 'a1'.repeat(32) } });
    try {
      const g2 = await pop(q, 'batch=10&consumerGroup=other', wrong);
      expect(g2.status).toBe(200);
      expect(g2.body.messages.map((m: any) => m.data)).toEqual([null, null]);
    } finally {
      await wrong.stop();
    }
    // Corrupt bytes: one flipped ciphertext byte fails the GCM tag.
    await b.sql.query(
      `update queen.messages m set encrypted = set_byte(m.encrypted, 14, (get_byte(m.encrypted, 14) + 1) % 256)
        from queen.partitions p where p.id = m.partition_id and p.queue_name = $1 and m.msg_offset = 1`,
      [q],
    );
    const g3 = await pop(q, 'batch=10&consumerGroup=third');
    expect(g3.status).toBe(200);
    expect(g3.body.messages.map((m: any) => m.data)).toEqual([null, secret('w2')]);
  });

  it('cipher format: IV || ciphertext || tag, random IV, round trip; bad keys are start-up errors', () => {
    const c = new PayloadCipher(KEY);
    const a = c.encrypt({ x: 'é' });
    const b2 = c.encrypt({ x: 'é' });
    expect(a.equals(b2)).toBe(false);
    expect(a.length).toBe(12 + Buffer.byteLength(JSON.stringify({ x: 'é' })) + 16);
    expect(c.decrypt(a)).toEqual({ x: 'é' });
    expect(() => new PayloadCipher('a1'.repeat(32)).decrypt(a)).toThrow();
    expect(() => readConfig({ QUEEN_ENCRYPTION_KEY: 'abc' })).toThrow(/QUEEN_ENCRYPTION_KEY must be 64 hex/);
    expect(readConfig({ QUEEN_ENCRYPTION_KEY: KEY }).encryptionKey).toBe(KEY);
  });

  it('queen_lease_expired_total{queue} counts leases found expired by pops', async () => {
    const q = uniqueName('lexp');
    await configure(q, { leaseTime: 1 });
    await b.http('POST', '/api/v1/push', { items: [{ queue: q, payload: 1 }] });
    expect((await pop(q)).status).toBe(200);
    await sleep(1100);
    const again = await eventually(async () => {
      const r = await pop(q);
      return r.status === 200 && r;
    }, 5000);
    expect(again.body.messages).toHaveLength(1);
    const text = (await b.http('GET', '/metrics')).body as string;
    expect(text).toContain(`queen_lease_expired_total{queue="${q}"} 1`);
  });
});
