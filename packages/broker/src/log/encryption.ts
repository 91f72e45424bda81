import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';
import { QueenError } from '@queen-mq/protocol';
import type { BrokerContext, EncryptionState, QueueFlags } from '../context/context.js';
import type { Database } from '../db/database.js';
import { ClockCache } from '../db/clock-cache.js';

// Encryption at rest (PROTOCOL §5.1 `encryptionEnabled`): payloads of a queue
// with the option are encrypted here, in the broker, at every edge where they
// enter the queue (push, transaction push, timer scheduling, stream cycle sink
// push); SQL only moves the opaque bytes (messages.encrypted, payload null).
// The key (QUEEN_ENCRYPTION_KEY) never leaves the process.

const IV_BYTES = 12;
const TAG_BYTES = 16;

/** A 64-hex-character QUEEN_ENCRYPTION_KEY, or a clear error naming it. */
function parseEncryptionKey(hex: string): Buffer {
  if (!/^[0-9a-fA-F]{64}$/.test(hex)) throw new Error('QUEEN_ENCRYPTION_KEY must be 64 hex characters (a 256-bit AES key)');
  return Buffer.from(hex, 'hex');
}

/** AES-256-GCM over the payload's JSON text. Stored form: 12-byte random IV || ciphertext || 16-byte tag. */
export class PayloadCipher {
  private readonly key: Buffer;

  constructor(keyHex: string) {
    this.key = parseEncryptionKey(keyHex);
  }

  encrypt(payload: unknown): Buffer {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const body = Buffer.concat([cipher.update(JSON.stringify(payload ?? null), 'utf8'), cipher.final()]);
    return Buffer.concat([iv, body, cipher.getAuthTag()]);
  }

  /** Throws on a wrong key or corrupt bytes (the GCM tag does not verify). */
  decrypt(stored: Buffer): unknown {
    if (stored.length < IV_BYTES + TAG_BYTES) throw new Error('encrypted payload is too short');
    const decipher = createDecipheriv('aes-256-gcm', this.key, stored.subarray(0, IV_BYTES));
    decipher.setAuthTag(stored.subarray(stored.length - TAG_BYTES));
    const text = Buffer.concat([decipher.update(stored.subarray(IV_BYTES, stored.length - TAG_BYTES)), decipher.final()]).toString('utf8');
    return JSON.parse(text);
  }
}

/**
 * How long this broker trusts a cached `encryptionEnabled` flag. A configure
 * or delete on this broker invalidates it at once; one on another broker is
 * seen within this time (the documented staleness: pushes in between follow
 * the old setting; pops decrypt by what each message holds, so either way
 * reads are right).
 */
const FLAG_TTL_MS = 5000;

/** Queue flags cached per broker at most (queue names are the clients' choice). */
export const FLAG_CACHE_MAX = 10_000;

/**
 * The encryption state of a new broker. Tests run several brokers in one
 * process with different keys, so it lives on each BrokerContext. Throws on
 * a malformed key: called at start-up.
 */
export function createEncryptionState(keyHex: string | undefined): EncryptionState {
  return { cipher: keyHex ? new PayloadCipher(keyHex) : null, flags: new ClockCache(FLAG_CACHE_MAX) };
}

/** Whether this broker holds a key, so `encryptionEnabled: true` can be honoured. */
export function encryptionAvailable(ctx: BrokerContext): boolean {
  return ctx.encryption.cipher !== null;
}

/** Drops cached flags (one queue, or all): after configure and queue delete. */
export function forgetEncryptionFlags(ctx: BrokerContext, queue?: string): void {
  const { flags } = ctx.encryption;
  if (queue === undefined) flags.clear();
  else flags.delete(queue);
}

/**
 * The cached flags of `queues`, each read at most once per FLAG_TTL_MS (one
 * query for all the misses). An absent queue is created with default
 * options: not encrypted, unbounded.
 */
async function queueFlags(ctx: BrokerContext, queues: Iterable<string>): Promise<Map<string, QueueFlags>> {
  const state = ctx.encryption;
  const out = new Map<string, QueueFlags>();
  const now = Date.now();
  const missing: string[] = [];
  for (const q of new Set(queues)) {
    const hit = state.flags.get(q);
    if (hit && now - hit.at < FLAG_TTL_MS) out.set(q, hit);
    else missing.push(q);
  }
  if (missing.length) {
    const { rows } = await ctx.db.query<{ name: string; encrypted: boolean; max_size: number }>(
      `select q.name, coalesce((q.options->>'encryptionEnabled')::boolean, false) as encrypted,
              coalesce((q.options->>'maxSize')::float8, 0) as max_size
         from queen.queues q where q.name = any($1::text[])`,
      [missing],
    );
    const found = new Map(rows.map((r) => [r.name, r]));
    for (const q of missing) {
      const r = found.get(q);
      const flags = { encrypted: r?.encrypted ?? false, maxSize: r?.max_size ?? 0, at: now };
      state.flags.set(q, flags);
      out.set(q, flags);
    }
  }
  return out;
}

/**
 * The maxSize of each of `queues` that has one (> 0), from the same cache as
 * encryptedQueues: a push into unbounded queues pays no round trip for it. A
 * maxSize configured on this broker counts at once (configure forgets the
 * cache); one configured through another broker counts here within
 * FLAG_TTL_MS.
 */
export async function queueMaxSizes(ctx: BrokerContext, queues: Iterable<string>): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const [q, flags] of await queueFlags(ctx, queues)) if (flags.maxSize > 0) out.set(q, flags.maxSize);
  return out;
}

/**
 * Which of `queues` have encryptionEnabled. Cached per broker (a ClockCache of
 * FLAG_CACHE_MAX queues): the push hot path costs no round trip (one lookup
 * per queue per FLAG_TTL_MS). Encryption never downgrades: on a broker
 * without a key, a write into an encrypted queue throws
 * ENCRYPTION_KEY_MISSING (503) before anything is stored.
 */
export async function encryptedQueues(ctx: BrokerContext, queues: Iterable<string>): Promise<Set<string>> {
  const state = ctx.encryption;
  const out = new Set<string>();
  for (const [q, flags] of await queueFlags(ctx, queues)) if (flags.encrypted) out.add(q);
  if (out.size > 0 && !state.cipher) {
    const names = [...out].sort();
    throw new QueenError('ENCRYPTION_KEY_MISSING', `Queue ${names.join(', ')} has encryptionEnabled but QUEEN_ENCRYPTION_KEY is not set on this broker; nothing was stored`, {
      extra: { queues: names },
    });
  }
  return out;
}

/** A payload's stored form for SQL (base64, as the allocator's `encrypted` field takes it). */
export function encryptPayload(ctx: BrokerContext, payload: unknown): string {
  const { cipher } = ctx.encryption;
  if (!cipher) throw new Error('no encryption key on this broker');
  return cipher.encrypt(payload).toString('base64');
}

/** Why a stored payload could not be read: `missing` = this broker has no key. */
export type UnreadableReason = 'missing' | 'undecryptable';

/**
 * A stored message's payload: plaintext rows as they are, encrypted rows
 * decrypted, or `{ unreadable }` when this broker has no key or the bytes do
 * not verify (wrong key, corruption). Pops never deliver such a message
 * (pop.ts); listings show it as null.
 */
export function tryReadPayload(ctx: BrokerContext, row: { payload: unknown; encrypted: Buffer | null }): { data: unknown } | { unreadable: UnreadableReason } {
  if (row.encrypted == null) return { data: row.payload };
  const { cipher } = ctx.encryption;
  if (!cipher) return { unreadable: 'missing' };
  try {
    return { data: cipher.decrypt(row.encrypted) };
  } catch {
    return { unreadable: 'undecryptable' };
  }
}

/**
 * A stored payload for listings (DLQ): an unreadable one answers null and
 * logs an error, so one bad message never fails a whole listing. Pops do not
 * use this: they refuse to lease what they cannot read.
 */
export function readPayload(ctx: BrokerContext, row: { payload: unknown; encrypted: Buffer | null; id?: string }): unknown {
  const r = tryReadPayload(ctx, row);
  if ('data' in r) return r.data;
  ctx.log.error({ messageId: row.id, reason: r.unreadable }, 'cannot read encrypted payload (no key, wrong key or corrupt bytes): data is null');
  return null;
}

/** The fixed text whose HMAC under the key is stored as the key check value. */
const KEY_CHECK_TEXT = 'queen-mq encryption key check v1';

/** HMAC-SHA256 of a fixed text under the key: tells keys apart without revealing them. */
function keyCheckValue(keyHex: string): string {
  return createHmac('sha256', parseEncryptionKey(keyHex)).update(KEY_CHECK_TEXT).digest('hex');
}

/**
 * Start-up check that every replica holds the same QUEEN_ENCRYPTION_KEY: the
 * first broker with a key stores its key check value
 * (queen.encryption_key_check); a broker whose key gives another value
 * throws, so it never starts writing ciphertext the others cannot read. A
 * broker without a key checks nothing (it refuses encrypted queues anyway).
 */
export async function checkEncryptionKey(db: Database, keyHex: string | undefined): Promise<void> {
  if (!keyHex) return;
  const kcv = keyCheckValue(keyHex);
  const { rows } = await db.query<{ kcv: string }>(
    `with ins as (insert into queen.encryption_key_check (kcv) values ($1) on conflict do nothing returning kcv)
     select kcv from ins union all select kcv from queen.encryption_key_check limit 1`,
    [kcv],
  );
  const stored = rows[0]?.kcv;
  if (stored !== kcv) {
    throw new Error(
      'QUEEN_ENCRYPTION_KEY does not match the key this database was set up with (queen.encryption_key_check holds another key check value): ' +
        'every broker on one database needs the same key, or encrypted messages become unreadable. Use the same key, or, only if no encrypted message must stay readable, delete that row.',
    );
  }
}
