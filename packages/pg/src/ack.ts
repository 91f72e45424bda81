import {
  ackBatchBody,
  ackRequestOf,
  ackResultsOf,
  ackStatus,
  issuesToDetails,
  option,
  parseOptions,
  QueenError,
  z,
  type AckAnswer,
  type AckDefaults,
  type AckInput,
  type AckResult,
} from '@queen-mq/protocol';
import type { PgClient } from './pg-client.js';
import { queenErrorOf } from './sql-errors.js';

/** Options of {@link ack} (an unknown or mistyped option throws VALIDATION_FAILED). */
export const ackOptionsSchema = z.object({
  consumerGroup: option(z.string().min(1).max(255).optional(), {
    description: "Consumer group; default the messages' `consumerGroup`, else the queue-mode group",
    rule: 'must be a group name of 1 to 255 characters',
  }),
  status: option(ackStatus.optional(), {
    description: 'Status of the messages that carry none',
    rule: 'must be completed, success, failed, dlq or retry',
    default: '`completed`',
  }),
  error: option(z.string().max(10000).optional(), { description: 'Failure text of the messages that carry none (`failed`, `dlq`)', rule: 'must be a string' }),
});

/** The one statement of an ack (queen.app_ack_v1, packages/broker/src/sql, around the broker's queen.log_ack_v2). */
const ACK_SQL = 'select queen.app_ack_v1($1, $2::jsonb) as r';

/**
 * Acknowledges popped messages inside the transaction `client` is in (the
 * inbox: your writes and the ack commit together). The ack is
 * `POST /api/v1/ack`'s own, fenced by the lease that delivered each message:
 * the cursor moves when your transaction commits.
 *
 * When any message cannot be acked (its lease expired or was taken over:
 * LEASE_EXPIRED; already past the cursor by another lease's ack; not found)
 * it throws that QueenError (`extra.results`: every item's result) and your
 * transaction is aborted in PostgreSQL: your own writes of it cannot commit
 * either, even if you catch the error. Run the handler again on the message
 * when it is redelivered. A message acked twice answers `alreadyAcked:true`.
 *
 * Throws VALIDATION_FAILED (nothing sent) for a bad item or option, or for
 * messages of several consumer groups in one call.
 */
export async function ack(client: PgClient, messages: AckInput | AckInput[], options: AckDefaults = {}): Promise<AckResult[]> {
  const defaults = parseOptions('ack', ackOptionsSchema, options);
  const list = Array.isArray(messages) ? messages : [messages];
  if (list.length === 0) return [];
  const request = ackRequestOf(list, defaults);
  const parsed = ackBatchBody.safeParse({ consumerGroup: request.consumerGroup, acknowledgments: request.items });
  if (!parsed.success) {
    const details = issuesToDetails('messages', parsed.error);
    throw new QueenError('VALIDATION_FAILED', `ack: ${details.map((d) => `${d.field} ${d.message}`).join('; ')}`, { details });
  }
  const { consumerGroup, acknowledgments: items } = parsed.data;
  let answer: AckAnswer;
  try {
    answer = (await client.query(ACK_SQL, [consumerGroup, JSON.stringify(items.map((item, idx) => ({ idx, ...item })))])).rows[0]!.r as AckAnswer;
  } catch (err) {
    throw queenErrorOf(err, 'ack');
  }
  return ackResultsOf(items, answer);
}
