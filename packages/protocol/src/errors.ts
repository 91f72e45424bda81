/**
 * The one error catalogue. Every request-level and item-level failure the
 * broker reports has a stable `code` here; clients branch on `code`, never on
 * the human text (which may change). HTTP status `0` marks item-level codes:
 * they live inside 200 responses as `success:false, code`. The broker's SQL
 * answers codes only (and structured fields); every text comes from here.
 * `detail`, where present, is appended to `message` when the raiser knows
 * every `{name}` it holds (errorMessage).
 */
export const errorCatalogue = {
  INVALID_JSON: { status: 400, message: 'Request body is not valid JSON' },
  VALIDATION_FAILED: { status: 400, message: 'Request validation failed' },
  SCHEDULE_INVALID_CRON: { status: 400, message: 'The cron expression is invalid or never fires (5 fields, or 6 with seconds first)' },
  SCHEDULE_INVALID_TIME_ZONE: { status: 400, message: 'The time zone is not an IANA name this broker knows (e.g. "Europe/Berlin")' },
  AUTH_REQUIRED: { status: 401, message: 'Authorization: Bearer token required' },
  AUTH_INVALID: { status: 401, message: 'Invalid token' },
  FORBIDDEN: { status: 403, message: 'Token level is below what this route requires' },
  FORBIDDEN_ORIGIN: { status: 403, message: 'Cross-site request from an origin not listed in QUEEN_CORS_ORIGINS' },
  HOST_NOT_ALLOWED: { status: 403, message: 'This broker listens on loopback only and answers only loopback Host names' },
  ROUTE_NOT_FOUND: { status: 404, message: 'Route not found' },
  QUEUE_NOT_FOUND: { status: 404, message: 'Queue not found' },
  PARTITION_NOT_FOUND: { status: 404, message: 'Partition not found' },
  CONSUMER_GROUP_NOT_FOUND: { status: 404, message: 'Consumer group not found' },
  QUERY_NOT_FOUND: { status: 404, message: 'Stream query not found' },
  PLAN_NOT_FOUND: { status: 404, message: 'No new version of this stream query was proposed: run plan() or run() with the new chain first' },
  KV_NOT_FOUND: { status: 404, message: 'Key not found' },
  SCHEDULE_NOT_FOUND: { status: 404, message: 'Schedule not found' },
  CONFIG_HASH_MISMATCH: { status: 409, message: 'config_hash mismatch: the stream query is registered with a different config_hash; pass reset:true to replace it' },
  QUERY_VERSION_CHANGED: { status: 409, message: 'Another version of this stream query was registered after this runner started; this version no longer commits (stop it, or run the new code)' },
  MIGRATION_NOT_CLAIMED: { status: 409, message: "This runner does not hold the claim on this partition's state migration (another runner took it over, or it is done)" },
  VERSION_CONFLICT: { status: 409, message: 'Version conflict', detail: 'on {key} (expected version {expected}, current {currentVersion})' },
  KV_TYPE_MISMATCH: { status: 409, message: 'Stored value is not an integer in range', detail: '({key}; integers are exact within ±(2^53−1))' },
  QUEUE_ENCRYPTED: { status: 409, message: 'The queue has encryptionEnabled: its payloads are encrypted with the broker\'s key, so only a broker can write them (push over HTTP instead); nothing was stored' },
  PAYLOAD_TOO_LARGE: { status: 413, message: 'Request body too large' },
  QUEUE_FULL: { status: 429, message: 'The write would take the queue past its maxSize pending messages; nothing was stored', detail: '({queue}: {pending} pending, maxSize {maxSize}, {count} to add)' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, message: 'A request body must be Content-Type: application/json' },
  INTERNAL_ERROR: { status: 500, message: 'Internal error' },
  PAYLOAD_UNDECRYPTABLE: { status: 500, message: 'A stored encrypted payload does not decrypt with this broker\'s key (wrong key or corrupt bytes); it was not delivered (a pop dead-letters such a message when it is the head of its partition)' },
  DB_UNAVAILABLE: { status: 503, message: 'Database unavailable' },
  DB_OUTCOME_UNKNOWN: {
    status: 503,
    message:
      'The database connection was lost while this request was being committed (a failover or crash): it may or may not have been applied. Resending is safe for pushes and transactions with transactionIds, acks and stream cycles',
  },
  ENCRYPTION_KEY_MISSING: { status: 503, message: 'The queue has encryptionEnabled but QUEEN_ENCRYPTION_KEY is not set on this broker; nothing was stored or delivered' },
  NOT_READY: { status: 503, message: 'Not ready' },
  MESSAGE_NOT_FOUND: { status: 0, message: 'Message not found' },
  LEASE_EXPIRED: { status: 0, message: 'Invalid or expired lease' },
  LEASE_NOT_FOUND: { status: 0, message: 'Lease not found' },
  MESSAGE_NOT_LEASED: { status: 0, message: 'Message is beyond what this lease delivered' },
  ALREADY_ACKED: { status: 0, message: 'Message already acknowledged' },
  ACK_BLOCKED: { status: 0, message: 'An earlier failed or retry item of this partition stopped this ack; the message will be redelivered' },
  FLUSH_DEFERRED: { status: 0, message: 'A message of the partition stamped before flush_before is not consumed yet (or flush_before is ahead of the broker clock); nothing was written' },
  ACK_COUNT_MISMATCH: { status: 0, message: 'ack.count does not land on the named message', detail: '(count {count})' },
  KV_MAX_EXCEEDED: { status: 0, message: 'Increment would exceed max', detail: '{max} of {key}' },
  WINDOW_REEMITTED: {
    status: 0,
    message: 'A closed window was emitted again under the same identity: the sink answered duplicate, so this result was not stored (reported by the runner to onError)',
    detail: '(window [{start}, {end}) key {key} of partition {partition})',
  },
} as const satisfies Record<string, { status: number; message: string; detail?: string }>;

export type ErrorCode = keyof typeof errorCatalogue;

/**
 * The text of a failure: the catalogue's message, and its `detail` with every
 * `{name}` filled from `params` when all of them are known (else the message
 * alone). `errorMessage('VERSION_CONFLICT', {key: 'ns/k', expected: 3,
 * currentVersion: 5})` = "Version conflict on ns/k (expected version 3, current 5)".
 */
export function errorMessage(code: ErrorCode, params: Record<string, unknown> = {}): string {
  const entry: { message: string; detail?: string } = errorCatalogue[code];
  if (!entry.detail) return entry.message;
  let complete = true;
  const detail = entry.detail.replace(/\{(\w+)\}/g, (_, name: string) => {
    const value = params[name];
    if (value === undefined || value === null) complete = false;
    return String(value);
  });
  return complete ? `${entry.message} ${detail}` : entry.message;
}

/** One offending field of a VALIDATION_FAILED answer, e.g. `body.items[2].queue`. */
export interface FieldIssue {
  field: string;
  message: string;
}

/** The JSON body of every non-2xx answer. */
export interface ErrorBody {
  error: string;
  code: ErrorCode;
  details?: FieldIssue[];
  [extra: string]: unknown;
}

const brand = Symbol.for('queen-mq.QueenError');

/**
 * A failure with a catalogue code. The broker maps it to `{error, code,
 * details?}`; the client rethrows server answers as this class. `instanceof`
 * works across two installed copies of the package (it checks a global
 * symbol, not the prototype chain).
 */
export class QueenError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly details?: FieldIssue[];
  readonly extra: Record<string, unknown>;

  /**
   * `message` defaults to the catalogue's text for `code`, its detail filled
   * from `params` (errorMessage); `status` to the code's HTTP status (200 for
   * item-level codes); `extra` fields go into the answer's body beside
   * `{error, code}`.
   */
  constructor(
    code: ErrorCode,
    message?: string,
    options: { details?: FieldIssue[]; status?: number; extra?: Record<string, unknown>; params?: Record<string, unknown>; cause?: unknown } = {},
  ) {
    super(message ?? errorMessage(code, options.params), options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'QueenError';
    this.code = code;
    this.status = options.status ?? (errorCatalogue[code].status || 200);
    this.details = options.details;
    this.extra = options.extra ?? {};
    Object.defineProperty(this, brand, { value: true });
  }

  static override [Symbol.hasInstance](value: unknown): boolean {
    return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[brand] === true;
  }

  toBody(): ErrorBody {
    return { ...this.extra, error: this.message, code: this.code, ...(this.details ? { details: this.details } : {}) };
  }
}

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(errorCatalogue, value);
}
