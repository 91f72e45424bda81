import { QueenError, errorMessage, isErrorCode } from '@queen-mq/protocol';

/** SQLSTATEs of a database without the functions this package calls: no Queen schema, or an older one. */
const MISSING_SCHEMA = new Set(['3F000', '42883']);

/**
 * The QueenError a failed statement of ours means, else the error itself
 * (the caller's own connection or SQL trouble stays pg's error). Our SQL
 * raises catalogue codes as SQLSTATE QS001: message = code, hint = the
 * answer's extra fields as JSON (queen.app_enqueue_v1, queen.app_ack_v1).
 */
export function queenErrorOf(err: unknown, call: string): unknown {
  const e = err as { code?: string; message?: string; hint?: string };
  if (e.code === 'QS001' && isErrorCode(e.message)) {
    let extra: Record<string, unknown> = {};
    try {
      extra = e.hint ? (JSON.parse(e.hint) as Record<string, unknown>) : {};
    } catch {
      /* a hint that is not ours: the code alone */
    }
    return new QueenError(e.message, `${call}: ${errorMessage(e.message, extra)}; the transaction is aborted`, { extra, cause: err });
  }
  if (e.code === 'P0002') {
    return new QueenError('QUEUE_NOT_FOUND', `${call}: a queue it writes to was deleted meanwhile; the transaction is aborted (run it again to re-create the queue)`, { cause: err });
  }
  if (e.code !== undefined && MISSING_SCHEMA.has(e.code)) {
    return new QueenError('NOT_READY', `${call}: this database has no Queen schema with ${call}'s function (connect to the broker's database, and run a broker of this version on it once so its migrations apply)`, { cause: err });
  }
  return err;
}
