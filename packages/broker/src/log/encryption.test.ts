import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, sleep, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';
import { readConfig } from '../context/config.js';
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

  const cursor = async (q: string, group: string) =>
    (
      await b.sql.query<{ cursor_offset: string; lease_id: string | null; lease_last_offset: string | null }>(
        `select c.cursor_offset, c.lease_id, c.lease_last_offset from queen.cursors c join queen.partitions p on p.id = c.partition_id
          where p.queue_name = $1 and c.consumer_group = $2`,
        [q, group],
      )
    ).rows[0];

  it('B46 a broker without the key refuses every write into an encrypted queue: 503 ENCRYPTION_KEY_MISSING, nothing stored', async () => {
    const q = uniqueName('b46n');
    await configure(q, { encryptionEnabled: true });
    const push = await plain.http('POST', '/api/v1/push', { items: [{ queue: q, payload: secret('n1') }] });
    expect(push.status).toBe(503);
    expect(push.body.code).toBe('ENCRYPTION_KEY_MISSING');
    // A mixed push is refused whole: the plaintext queue gets nothing either.
    const other = uniqueName('b46n-plain');
    const mixed = await plain.http('POST', '/api/v1/push', { items: [{ queue: other, payload: 1 }, { queue: q, payload: secret('n2') }] });
    expect(mixed.status).toBe(503);
    const txn = await plain.http('POST', '/api/v1/transaction', { operations: [{ type: 'push', items: [{ queue: q, payload: secret('n3') }] }] });
    expect(txn.status).toBe(503);
    expect(txn.body.code).toBe('ENCRYPTION_KEY_MISSING');
    const timer = await plain.http('POST', '/api/v1/transaction', { timers: [{ queue: q, delayMs: 0, payload: secret('n4') }] });
    expect(timer.status).toBe(503);
    expect(timer.body.code).toBe('ENCRYPTION_KEY_MISSING');
    const { body: reg } = await plain.http('POST', '/streams/v1/queries', { name: uniqueName('encn'), source_queue: 'src', config_hash: 'h' });
    const cycle = await plain.http('POST', '/streams/v1/cycle', {
      query_id: reg.query_id,
      partition_id: '00000000-0000-4000-8000-000000000047',
      ack: null,
      push_items: [{ queue: q, payload: secret('n5') }],
    });
    expect(cycle.status).toBe(503);
    expect(cycle.body.code).toBe('ENCRYPTION_KEY_MISSING');
    await sleep(300); // a timer, had one been stored, would fire by now
    expect(await stored(q)).toEqual([]);
    expect(await stored(other)).toEqual([]);
    expect((await b.sql.query('select count(*)::int as n from queen.log_timers where queue_name = $1', [q])).rows[0].n).toBe(0);
  });

  it('B46 a broker without the key never leases an encrypted message as data null: 503, no lease, cursor untouched', async () => {
    const q = uniqueName('b46w');
    await configure(q, { encryptionEnabled: true });
    await b.http('POST', '/api/v1/push', { items: [{ queue: q, payload: secret('w1') }, { queue: q, payload: secret('w2') }] });
    const got = await pop(q, 'batch=10&consumerGroup=g', plain);
    expect(got.status).toBe(503);
    expect(got.body.code).toBe('ENCRYPTION_KEY_MISSING');
    expect(got.body.transactionId).toBeTypeOf('string');
    expect(await cursor(q, 'g')).toMatchObject({ cursor_offset: '0', lease_id: null });
    const auto = await pop(q, 'batch=10&consumerGroup=a&autoAck=true', plain);
    expect(auto.status).toBe(503);
    expect(await cursor(q, 'a')).toMatchObject({ cursor_offset: '0', lease_id: null });
    // The broker with the key delivers both, to both groups.
    expect((await pop(q, 'batch=10&consumerGroup=g')).body.messages.map((m: any) => m.data)).toEqual([secret('w1'), secret('w2')]);
    expect((await pop(q, 'batch=10&consumerGroup=a&autoAck=true')).body.messages.map((m: any) => m.data)).toEqual([secret('w1'), secret('w2')]);
  });

  /** Flips one ciphertext byte of the message at `offset`: its GCM tag no longer verifies. */
  const corrupt = (q: string, offset: number) =>
    b.sql.query(
      `update queen.messages m set encrypted = set_byte(m.encrypted, 14, (get_byte(m.encrypted, 14) + 1) % 256)
        from queen.partitions p where p.id = m.partition_id and p.queue_name = $1 and m.msg_offset = $2`,
      [q, offset],
    );

  it('B46 corrupt bytes behind readable ones: those are delivered and leased alone; at the head the message is dead-lettered and the pop moves on', async () => {
    const q = uniqueName('b46c');
    await configure(q, { encryptionEnabled: true, leaseTime: 60 });
    await b.http('POST', '/api/v1/push', { items: [1, 2, 3].map((n) => ({ queue: q, payload: secret(`c${n}`) })) });
    await corrupt(q, 2);
    const g1 = await pop(q, 'batch=10');
    expect(g1.status).toBe(200);
    expect(g1.body.messages.map((m: any) => m.data)).toEqual([secret('c1')]);
    expect(await cursor(q, '__QUEUE_MODE__')).toMatchObject({ cursor_offset: '0', lease_last_offset: '1' });
    const [m1] = g1.body.messages;
    const ack = await b.http('POST', '/api/v1/ack', { transactionId: m1.transactionId, partitionId: m1.partitionId, leaseId: m1.leaseId, status: 'completed' });
    expect(ack.body[0].success, JSON.stringify(ack.body)).toBe(true);
    expect(await cursor(q, '__QUEUE_MODE__')).toMatchObject({ cursor_offset: '1', lease_id: null });

    // Now the head: dead-lettered, and the same pop delivers the message after it.
    const g2 = await pop(q, 'batch=10');
    expect(g2.status).toBe(200);
    expect(g2.body.messages.map((m: any) => [m.offset, m.data])).toEqual([['3', secret('c3')]]);
    expect(await cursor(q, '__QUEUE_MODE__')).toMatchObject({ cursor_offset: '2', lease_last_offset: '3' });
    const dlq = await b.http('GET', `/api/v1/dlq?queue=${q}`);
    expect(dlq.body.total).toBe(1);
    expect(dlq.body.messages[0]).toMatchObject({ offset: '2', consumerGroup: '__QUEUE_MODE__', data: null });
    expect(dlq.body.messages[0].errorMessage).toMatch(/^PAYLOAD_UNDECRYPTABLE: /);
  });

  it('B46 a corrupt head never starves its partition: partitions=1 pops, pinned pops, autoAck and long-polls all move on; each group dead-letters it once', async () => {
    const q = uniqueName('b46s');
    await configure(q, { encryptionEnabled: true, leaseTime: 60 });
    await b.http('POST', '/api/v1/push', { items: [1, 2, 3, 4].map((n) => ({ queue: q, payload: secret(`s${n}`) })) });
    await corrupt(q, 1);
    await corrupt(q, 2);
    // A run of two at the head, batch=1: dead-lettered in one pop, which then delivers offset 3.
    const one = await pop(q, 'batch=1&partitions=1&consumerGroup=g1');
    expect(one.status).toBe(200);
    expect(one.body.messages.map((m: any) => m.offset)).toEqual(['3']);
    const pinned = await b.http('GET', `/api/v1/pop/queue/${q}/partition/Default?batch=10&consumerGroup=g2`);
    expect(pinned.status).toBe(200);
    expect(pinned.body.messages.map((m: any) => m.offset)).toEqual(['3', '4']);
    const auto = await pop(q, 'batch=10&autoAck=true&consumerGroup=g3');
    expect(auto.body.messages.map((m: any) => m.data)).toEqual([secret('s3'), secret('s4')]);
    expect(await cursor(q, 'g3')).toMatchObject({ cursor_offset: '4', lease_id: null });
    const waited = await pop(q, 'batch=10&wait=true&timeout=5000&consumerGroup=g4');
    expect(waited.body.messages.map((m: any) => m.offset)).toEqual(['3', '4']);
    // Nothing was lost: every group's entries are in the DLQ, with their bytes.
    const dlq = await b.http('GET', `/api/v1/dlq?queue=${q}&limit=100`);
    expect(dlq.body.messages.map((m: any) => `${m.consumerGroup}:${m.offset}`).sort()).toEqual(
      ['g1:1', 'g1:2', 'g2:1', 'g2:2', 'g3:1', 'g3:2', 'g4:1', 'g4:2'],
    );
    // Again: those groups are past it, nothing is dead-lettered twice.
    expect((await pop(q, 'batch=10&consumerGroup=g3&autoAck=true')).status).toBe(204);
    expect((await b.http('GET', `/api/v1/dlq?queue=${q}&limit=100`)).body.total).toBe(8);
    const text = (await b.http('GET', '/metrics')).body as string;
    expect(text).toContain(`queen_dlq_messages_total{queue="${q}"} 8`);
  });

  it('B46 a broker without the key never dead-letters: the message stays for a broker with it', async () => {
    const q = uniqueName('b46m');
    await configure(q, { encryptionEnabled: true });
    await b.http('POST', '/api/v1/push', { items: [{ queue: q, payload: secret('m1') }] });
    for (let i = 0; i < 3; i++) expect((await pop(q, 'batch=10', plain)).status).toBe(503);
    expect((await b.http('GET', `/api/v1/dlq?queue=${q}`)).body.total).toBe(0);
    expect((await pop(q)).body.messages[0].data).toEqual(secret('m1'));
  });

  it('B46 a plaintext timer due for a queue encrypted since is never fired as plaintext: held without a key, encrypted and fired by a broker with it', async () => {
    const solo = await startTestBroker({ config: { encryptionKey: undefined, timerPollMs: 50 } });
    try {
      const q = uniqueName('b46timer');
      const t = await solo.http('POST', '/api/v1/transaction', { timers: [{ queue: q, delayMs: 200, payload: secret('timer-late') }] });
      expect(t.status).toBe(200);
      // The queue turns encrypted (as a keyed replica's configure would) before the timer is due.
      await solo.sql.query(`insert into queen.queues (name, options) values ($1, '{"encryptionEnabled": true}'::jsonb)
                            on conflict (name) do update set options = queen.queues.options || '{"encryptionEnabled": true}'::jsonb`, [q]);
      await sleep(800);
      const count = async () =>
        (await solo.sql.query('select count(*)::int as n from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1', [q])).rows[0].n;
      expect(await count()).toBe(0);
      const pending = await solo.sql.query('select payload, encrypted from queen.log_timers where queue_name = $1', [q]);
      expect(pending.rows).toHaveLength(1);
      expect(pending.rows[0].encrypted).toBeNull();

      const keyed = await startTestBroker({ databaseUrl: solo.databaseUrl, config: { encryptionKey: KEY, timerPollMs: 50 } });
      try {
        const rows = await eventually(async () => {
          const r = (
            await solo.sql.query<{ payload: unknown; encrypted: Buffer | null }>(
              'select m.payload, m.encrypted from queen.messages m join queen.partitions p on p.id = m.partition_id where p.queue_name = $1',
              [q],
            )
          ).rows;
          return r.length === 1 && r;
        }, 5000);
        expectCiphertextOnly(rows, 'TOP-SECRET-timer-late');
        expect((await pop(q, '', keyed)).body.messages[0].data).toEqual(secret('timer-late'));
      } finally {
        await keyed.stop();
      }
    } finally {
      await solo.stop();
    }
  });

  it('B46 replicas with different keys: a broker whose key does not match the database key check refuses to start', async () => {
    const { rows } = await b.sql.query('select kcv from queen.encryption_key_check');
    expect(rows).toHaveLength(1);
    expect(rows[0].kcv).not.toContain(KEY);
    await expect(startTestBroker({ databaseUrl: b.databaseUrl, config: { encryptionKey: 'a1'.repeat(32) } })).rejects.toThrow(
      /QUEEN_ENCRYPTION_KEY does not match/,
    );
    const same = await startTestBroker({ databaseUrl: b.databaseUrl, config: { encryptionKey: KEY } });
    await same.stop();
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
