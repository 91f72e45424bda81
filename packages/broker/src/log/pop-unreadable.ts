import { QueenError, type PopQuery } from '@queen-mq/protocol';
import type { BrokerContext } from '../context/context.js';
import { tryReadPayload, type UnreadableReason } from './encryption.js';

// What a pop does with claimed messages it cannot read (encryption never
// downgrades: a payload is never delivered as data null). Two cases differ:
//
// - `missing`: this broker has no QUEEN_ENCRYPTION_KEY. The broker is
//   misconfigured, not the message: it stays in place, and a broker with the
//   key delivers it. The pop answers 503 ENCRYPTION_KEY_MISSING.
// - `undecryptable`: this broker has the key (the one every replica must
//   share, checked at start-up) and the bytes do not verify: corrupt bytes,
//   or a payload written under a key retired since. No retry can read it, so
//   leaving it at the head would answer the same error to every pop of that
//   partition forever and starve the messages behind it. At the head of its
//   partition it is dead-lettered for the popping group with error
//   PAYLOAD_UNDECRYPTABLE (bytes kept: a DLQ entry lives as long as its
//   message, and a broker given the old key reads it again), the cursor
//   moves past it, and the pop goes on to the messages after it. Behind
//   readable messages of the same pop it is handed back; the next pop finds
//   it at the head.

/** A claimed row as far as this module reads it. */
interface ClaimedRow {
  partition_id: string;
  partition_name: string;
  msg_offset: string;
  transaction_id: string;
  payload: unknown;
  encrypted: Buffer | null;
}

/** One partition's unreadable messages in one pop. */
interface Unreadable<R> {
  /** Leading undecryptable run: dead-lettered. */
  dead: R[];
  /** Whether a readable message of this partition was delivered. */
  delivered: boolean;
  /** From the first unreadable message after a delivered one (or any, without a key): handed back. */
  stop?: { from: string; last: string; reason: UnreadableReason; row: R };
}

/**
 * The claimed rows a pop may deliver, with their payloads, and how many it
 * dead-lettered. Unreadable ones are settled in one statement
 * (queen.log_pop_dead_letter_v1). When nothing is left to deliver: a pop
 * that dead-lettered something answers `deadLettered > 0` (the caller claims
 * again at once: the partition has moved on), else it throws
 * ENCRYPTION_KEY_MISSING (503) or PAYLOAD_UNDECRYPTABLE (500) naming the
 * message, which stays in place.
 */
export async function readableRows<R extends ClaimedRow>(
  ctx: BrokerContext,
  queue: string,
  rows: R[],
  q: PopQuery,
  leaseId: string,
): Promise<{ delivered: R[]; data: unknown[]; deadLettered: number }> {
  const delivered: R[] = [];
  const data: unknown[] = [];
  const parts = new Map<string, Unreadable<R>>();
  for (const r of rows) {
    let p = parts.get(r.partition_id);
    if (!p) parts.set(r.partition_id, (p = { dead: [], delivered: false }));
    if (p.stop) {
      p.stop.last = r.msg_offset;
      continue;
    }
    const read = tryReadPayload(ctx, r);
    if ('data' in read) {
      p.delivered = true;
      delivered.push(r);
      data.push(read.data);
    } else if (read.unreadable === 'undecryptable' && !p.delivered) p.dead.push(r);
    else p.stop = { from: r.msg_offset, last: r.msg_offset, reason: read.unreadable, row: r };
  }
  const settled = [...parts].filter(([, p]) => p.dead.length > 0 || p.stop);
  if (settled.length === 0) return { delivered, data, deadLettered: 0 };

  const items = settled.map(([partitionId, p]) => ({
    partitionId,
    ...(p.dead.length ? { dead: p.dead.map((r) => r.msg_offset) } : {}),
    ...(p.stop ? { from: p.stop.from, last: p.stop.last } : {}),
  }));
  const reason = `PAYLOAD_UNDECRYPTABLE: dead-lettered by a pop of group ${q.consumerGroup}: the encrypted payload does not decrypt with the broker's key (corrupt bytes, or written under a key retired since)`;
  const { rows: res } = await ctx.db.query<{ n: number }>('select queen.log_pop_dead_letter_v1($1, $2, $3, $4, $5::jsonb) as n', [
    q.consumerGroup,
    leaseId,
    q.autoAck,
    reason,
    JSON.stringify(items),
  ]);
  const deadLettered = res[0]!.n;
  ctx.totals.touch(items.map((i) => i.partitionId));
  if (deadLettered > 0) ctx.metrics.deadLettered.inc({ queue }, deadLettered);
  for (const [partitionId, p] of settled) {
    if (p.dead.length) {
      ctx.log.error(
        { queue, partition: p.dead[0]!.partition_name, partitionId, consumerGroup: q.consumerGroup, offsets: p.dead.map((r) => r.msg_offset) },
        'encrypted payload does not decrypt with this broker\'s key (corrupt bytes or a retired key): dead-lettered, the partition moves on',
      );
    }
    if (p.stop) {
      ctx.log.error(
        { queue, partition: p.stop.row.partition_name, partitionId, offset: p.stop.from, transactionId: p.stop.row.transaction_id, reason: p.stop.reason },
        'encrypted payload cannot be read on this broker: not delivered, left in place',
      );
    }
  }
  if (delivered.length > 0 || deadLettered > 0) return { delivered, data, deadLettered };

  const first = settled.map(([, p]) => p.stop ?? { from: p.dead[0]!.msg_offset, reason: 'undecryptable' as const, row: p.dead[0]! })[0]!;
  const extra = { partitionId: first.row.partition_id, transactionId: first.row.transaction_id };
  if (first.reason === 'missing') {
    throw new QueenError('ENCRYPTION_KEY_MISSING', `Message ${extra.transactionId} is encrypted but QUEEN_ENCRYPTION_KEY is not set on this broker; it was not delivered and stays in place`, { extra });
  }
  throw new QueenError('PAYLOAD_UNDECRYPTABLE', `Message ${extra.transactionId} does not decrypt with this broker's key (wrong key or corrupt bytes); it was not delivered`, { extra });
}
