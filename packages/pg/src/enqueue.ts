import { issuesToDetails, option, parseOptions, pushItem, pushResultOf, pushWireItem, QueenError, z, type PushInput, type PushResult } from '@queen-mq/protocol';
import type { PgClient } from './pg-client.js';
import { queenErrorOf } from './sql-errors.js';

/** Options of {@link enqueue} (an unknown or mistyped option throws VALIDATION_FAILED). */
export const enqueueOptionsSchema = z.object({
  partition: option(z.string().min(1).max(255).optional(), {
    description: 'Partition of the items that name none',
    rule: 'must be a partition name of 1 to 255 characters',
    default: '`Default`',
  }),
});

/** Options of {@link enqueue}. */
export interface EnqueueOptions {
  /** Partition of the items that name none; default `Default`. */
  partition?: string;
}

const itemsSchema = z.array(pushItem);

/** The one statement of an enqueue (queen.app_enqueue_v1, packages/broker/src/sql). */
const ENQUEUE_SQL = 'select status, message_id, "offset", partition_id from queen.app_enqueue_v1($1::jsonb)';

interface EnqueueRow {
  status: 'queued' | 'duplicate';
  message_id: string;
  offset: string;
  partition_id: string;
}

/**
 * Appends `items` to `queue` inside the transaction `client` is in, in one
 * statement: the messages exist if and when that transaction commits, and
 * parked pops wake then (never on a rollback). Items are what
 * `queen.queue(queue).push()` takes: `{ payload, partition?, transactionId?,
 * traceId? }` or plain payloads. Offsets, deduplication by `transactionId`
 * (against every write path: a repeat answers `duplicate`) and order come
 * from the broker's allocator; missing queues and partitions are created
 * (and undone by a rollback).
 *
 * Holds each written partition's append lock until your transaction ends:
 * other writers to those partitions wait for your commit, so keep the
 * transaction short.
 *
 * Throws QueenError: VALIDATION_FAILED (a bad item or option; nothing sent),
 * QUEUE_ENCRYPTED (an encryptionEnabled queue: only a broker holds its key),
 * QUEUE_FULL (the queue's maxSize leaves no room for the items; `extra`
 * carries queue, pending, maxSize and count; nothing appended), NOT_READY (no Queen schema in this database). After a throw from
 * PostgreSQL your transaction is aborted: roll it back.
 */
export async function enqueue(
  client: PgClient,
  queue: string,
  items: PushInput | unknown | (PushInput | unknown)[],
  options: EnqueueOptions = {},
): Promise<PushResult[]> {
  const { partition } = parseOptions('enqueue', enqueueOptionsSchema, options);
  const list = Array.isArray(items) ? items : [items];
  if (list.length === 0) return [];
  const parsed = itemsSchema.safeParse(list.map((raw) => pushWireItem(queue, raw, partition)));
  if (!parsed.success) {
    const details = issuesToDetails('items', parsed.error);
    throw new QueenError('VALIDATION_FAILED', `enqueue: ${details.map((d) => `${d.field} ${d.message}`).join('; ')}`, { details });
  }
  const wire = parsed.data;
  const allocatorItems = wire.map((i) => ({
    queue: i.queue,
    partition: i.partition,
    payload: i.payload,
    ...(i.transactionId !== undefined ? { transaction_id: i.transactionId } : {}),
    ...(i.traceId !== undefined ? { trace_id: i.traceId } : {}),
    ...(i.traceparent !== undefined ? { traceparent: i.traceparent } : {}),
  }));
  let rows: EnqueueRow[];
  try {
    ({ rows } = await client.query(ENQUEUE_SQL, [JSON.stringify(allocatorItems)]));
  } catch (err) {
    throw queenErrorOf(err, 'enqueue');
  }
  return rows.map((r, index) => pushResultOf(index, wire[index]!, r.partition_id, r.status, r.message_id, r.offset));
}
