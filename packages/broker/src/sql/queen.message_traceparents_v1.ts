import type { NamedStatement } from '../db/database.js';

// The TypeScript half of queen.message_traceparents_v1.sql, beside it.

/**
 * The W3C trace context of claimed messages that carry a traceId (tracing
 * clients set both; migration 010), read after the pop committed: log_pop_v4
 * does not return it, and an untraced pop never asks.
 */
export const TRACEPARENTS_SQL: NamedStatement = {
  name: 'queen_pop_traceparents',
  text: 'select partition_id, msg_offset::text as msg_offset, traceparent from queen.message_traceparents_v1($1::uuid[], $2::bigint[])',
};

/** One row of TRACEPARENTS_SQL. */
export interface TraceparentRow {
  partition_id: string;
  msg_offset: string;
  traceparent: string | null;
}
