import type { NamedStatement } from '../db/database.js';

// The TypeScript half of queen.log_append_v1.sql, beside it: the push
// statement that calls the allocator, the items it takes and the rows it
// answers (queen.log_push_many_v1 takes and answers the same). A change to
// the function's arguments or result is a change to both files.

/** A push item in the allocator's shape (queen.log_append_v1). */
export interface AllocatorItem {
  partition_id: string;
  payload?: unknown;
  /** Base64 ciphertext of an encryptionEnabled queue's payload (stored with payload null). */
  encrypted?: string;
  transaction_id?: string;
  trace_id?: string;
  /** W3C trace context (migration 010's column); absent for untraced messages. */
  traceparent?: string;
}

/** One row of PUSH_RUN_SQL and of PUSH_MANY_SQL, in input order (the offset as text: pg reads int8 so). */
export interface AllocatorResult {
  status: 'queued' | 'duplicate';
  message_id: string;
  offset: string;
}

/**
 * A push to one partition (every push of our client and of Queen's) goes
 * straight to the allocator, queen.log_append_v1, as that partition's run:
 * log_push_many_v1 would only find that out by checking every item's
 * partition_id, which is then written, sent and parsed once per item for
 * nothing. log_append_v1 locks the partition itself.
 */
export const PUSH_RUN_SQL: NamedStatement = {
  name: 'queen_push_run',
  text: 'select r_status as status, r_message_id as message_id, r_offset as "offset" from queen.log_append_v1($1, $2::jsonb, $3) order by r_ord',
};
