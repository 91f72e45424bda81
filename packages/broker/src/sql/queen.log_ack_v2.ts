import type { AckAnswer } from '@queen-mq/protocol';
import type { NamedStatement } from '../db/database.js';

// The TypeScript half of queen.log_ack_v2.sql, beside it: the statements
// that call the function, the order of their parameters and the row they
// answer. A change to the function's arguments or result is a change to
// both files.

/** One pop's run, as the function's arrays take it. */
export interface AckRun {
  partitionId: string;
  leaseId: string | null;
  offsets: string[];
  txids: string[];
}

/** An ack request as the function takes it: a pop's run as arrays, any other as its wire items (each with its idx) in jsonb. */
export type AckCall = { run: AckRun } | { items: readonly object[]; partitionIds: string[] };

/** One row of ACK_SQL (`released`: the offset of an applied run whose move ended the lease). */
export interface AckRow {
  released: string | null;
  queue_name: string | null;
  partition_name: string | null;
  /**
   * The per-item results of the walk, or the compact form of a request
   * whose every item completed inside its lease (ackResultsOf expands both);
   * null when a pop's run was applied: the row's other columns and the run
   * make the answer (runAnswerOf, ack.ts).
   */
  answer: AckAnswer | null;
  /** The request's partitions a pop of the group could claim now (all of them in the `skip` form). */
  claimable: string[];
}

const ACK =
  'with a as materialized (select * from queen.log_ack_v2($1, $2::jsonb, $3::uuid, $4::uuid, $5::bigint[], $6::text[]))' +
  ' select a.r_released as released, a.r_queue_name as queue_name, a.r_partition_name as partition_name, a.r_answer as answer';

/**
 * The SQL of an ack request, parsed once per connection: the ack, then (in
 * the `ask` form) which of the partitions it named a pop of the group could
 * claim now, asked in a snapshot taken after the ack's changes (migration
 * 017). Two statements, not a boolean parameter: a custom plan folds such a
 * CASE away, so the generic plan always looked dearer and PostgreSQL planned
 * the statement again on every call (30-50 µs of an ack's 350-500).
 */
export const ACK_SQL = {
  skip: { name: 'queen_ack', text: `${ACK}, $7::uuid[] as claimable from a` },
  ask: { name: 'queen_ack_claimable', text: `${ACK}, queen.log_claimable_of_v1($7::uuid[], $1) as claimable from a` },
} satisfies Record<string, NamedStatement>;

/** ACK_SQL's parameters for a request of `group`. */
export function ackParams(group: string, call: AckCall): unknown[] {
  if ('run' in call) {
    const { partitionId, leaseId, offsets, txids } = call.run;
    return [group, null, partitionId, leaseId, offsets, txids, [partitionId]];
  }
  return [group, JSON.stringify(call.items), null, null, null, null, call.partitionIds];
}

/** A transaction's ack of one item ($2: the jsonb array of it), on the transaction's client: the answer alone. */
export const TRANSACTION_ACK_SQL = 'select r_answer as answer from queen.log_ack_v2($1, $2::jsonb, null, null, null, null)';
