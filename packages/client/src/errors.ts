import { QueenError, isErrorCode, type FieldIssue } from '@queen-mq/protocol';

/**
 * Turns a non-2xx answer into the catalogue error the broker meant: same
 * `code`, the HTTP `status`, `details` of a VALIDATION_FAILED, and every other
 * body field (e.g. `query_id` of a 409 CONFIG_HASH_MISMATCH) in `extra`.
 * An answer that is not a broker error body (a proxy's 502 page) becomes
 * INTERNAL_ERROR carrying the status and the raw text.
 */
export function errorFromResponse(status: number, body: unknown, text: string): QueenError {
  if (typeof body === 'object' && body !== null && !Array.isArray(body)) {
    const { error, code, details, ...extra } = body as Record<string, unknown>;
    if (isErrorCode(code)) {
      return new QueenError(code, typeof error === 'string' ? error : undefined, {
        status,
        details: Array.isArray(details) ? (details as FieldIssue[]) : undefined,
        extra,
      });
    }
  }
  return new QueenError('INTERNAL_ERROR', `HTTP ${status} without a Queen error body`, { status, extra: { body: text.slice(0, 2000) } });
}
