import { type QueenError } from '@queen-mq/client';

/**
 * Exit codes of `queen` (documented in the README): scripts branch on them.
 */
export const EXIT = {
  OK: 0,
  /** The broker refused (any other catalogue code) or could not be reached. */
  ERROR: 1,
  /** A mistake on the command line. */
  USAGE: 2,
  /** What the command names does not exist: queue, partition, group, query, KV key, DLQ entry. */
  NOT_FOUND: 3,
  /** A conflict: VERSION_CONFLICT, CONFIG_HASH_MISMATCH, KV_TYPE_MISMATCH. */
  CONFLICT: 4,
  /** `queen status`: the broker answers but is not ready (database down or schema behind). */
  NOT_READY: 5,
} as const;

const NOT_FOUND_CODES = new Set(['QUEUE_NOT_FOUND', 'PARTITION_NOT_FOUND', 'CONSUMER_GROUP_NOT_FOUND', 'QUERY_NOT_FOUND', 'KV_NOT_FOUND', 'MESSAGE_NOT_FOUND', 'PLAN_NOT_FOUND', 'SCHEDULE_NOT_FOUND']);
const CONFLICT_CODES = new Set(['VERSION_CONFLICT', 'CONFIG_HASH_MISMATCH', 'KV_TYPE_MISMATCH']);

/** The exit code for an error the broker answered with. */
export function exitCodeOf(err: QueenError): number {
  if (NOT_FOUND_CODES.has(err.code)) return EXIT.NOT_FOUND;
  if (CONFLICT_CODES.has(err.code)) return EXIT.CONFLICT;
  return EXIT.ERROR;
}
