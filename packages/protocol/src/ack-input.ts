import type { AckItem, AckStatus } from './ack.js';
import { QueenError } from './errors.js';

/**
 * What to acknowledge, as a program hands it to a client (`queen.ack`) or to
 * @queen-mq/pg's `ack`: a popped message works as is (its extra fields are
 * ignored).
 */
export interface AckInput {
  transactionId: string;
  partitionId: string;
  /** Fences the ack to the lease that delivered it; `""` (autoAck pops) counts as absent. */
  leaseId?: string;
  /** Default: the options' status, else `completed`. */
  status?: AckStatus;
  /** Failure text stored with a `failed`/`dlq` ack. */
  error?: string;
  /** Taken as the group when the options name none (popped messages carry it). */
  consumerGroup?: string;
  /** The message's offset (popped messages carry it): lets the broker find it by key. */
  offset?: string;
}

/** The defaults an ack call gives its items. */
export interface AckDefaults {
  /** Consumer group; default the items' `consumerGroup`, else the queue-mode group. */
  consumerGroup?: string;
  /** Status for items that carry none. Default `completed`. */
  status?: AckStatus;
  /** Error text for items that carry none. */
  error?: string;
}

/** An ack request: its group (undefined: the queue-mode group) and its wire items. */
export interface AckRequest {
  consumerGroup: string | undefined;
  items: AckItem[];
}

/**
 * The request of one ack call: one consumer group (the options', else the
 * one the items name; items of several groups throw VALIDATION_FAILED, since
 * one request acks for one group) and the wire items.
 */
export function ackRequestOf(list: AckInput[], defaults: AckDefaults = {}): AckRequest {
  const groups = new Set(list.map((i) => i.consumerGroup).filter((g): g is string => !!g));
  if (!defaults.consumerGroup && groups.size > 1) {
    throw new QueenError('VALIDATION_FAILED', 'ack items belong to several consumer groups; ack them per group', {
      details: [{ field: 'consumerGroup', message: `items name ${[...groups].join(', ')}` }],
    });
  }
  const items = list.map((i) => {
    const error = i.error ?? defaults.error;
    return {
      transactionId: i.transactionId,
      partitionId: i.partitionId,
      status: i.status ?? defaults.status ?? 'completed',
      ...(i.leaseId ? { leaseId: i.leaseId } : {}),
      ...(i.offset ? { offset: i.offset } : {}),
      ...(error !== undefined ? { error } : {}),
    };
  });
  return { consumerGroup: defaults.consumerGroup ?? [...groups][0], items };
}
