// When a failed call may be sent again, and how long to wait before it.

/**
 * Socket error codes raised before a single byte of the request left: safe to
 * resend anything. CONNECT_TIMEOUT is the client's own (http-exchange.ts), the
 * UND_ERR_ codes come from a caller's undici dispatcher.
 */
const NOT_SENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'CONNECT_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT']);

/** Errors of the connection itself (as opposed to an answer from the broker). */
const CONNECTION = new Set([
  ...NOT_SENT,
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
]);

function codeOf(err: unknown): string | undefined {
  const e = err as { code?: unknown; cause?: { code?: unknown } } | null;
  if (typeof e?.code === 'string') return e.code;
  if (typeof e?.cause?.code === 'string') return e.cause.code;
  return undefined;
}

/** The request certainly never reached the broker (connect failed). */
export function neverSent(err: unknown): boolean {
  const code = codeOf(err);
  return code !== undefined && NOT_SENT.has(code);
}

/** A transport failure: the broker may or may not have processed the request. */
export function isConnectionError(err: unknown): boolean {
  const code = codeOf(err);
  if (code !== undefined && CONNECTION.has(code)) return true;
  // Our own per-request timeout (AbortSignal.timeout) surfaces as a TimeoutError.
  return (err as { name?: string } | null)?.name === 'TimeoutError';
}

export interface BackoffPolicy {
  /** First delay, ms. */
  baseMs: number;
  /** Upper bound of any delay, ms. */
  maxMs: number;
}

/**
 * Exponential backoff with full jitter: attempt n waits a uniform random time
 * in [0, min(max, base * 2^n)], so many clients retrying after one broker
 * hiccup do not come back in lockstep.
 */
export function backoffDelay(attempt: number, policy: BackoffPolicy): number {
  const ceiling = Math.min(policy.maxMs, policy.baseMs * 2 ** attempt);
  return Math.round(Math.random() * ceiling);
}

/** Sleeps `ms`, or rejects with the signal's reason as soon as it aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * How long a 429 answer asks the caller to wait, ms: its body's `retryAfter`
 * (seconds, the same value as its Retry-After header), or undefined when it
 * gives none.
 */
export function retryAfterMs(body: unknown): number | undefined {
  const s = (body as { retryAfter?: unknown } | null | undefined)?.retryAfter;
  return typeof s === 'number' && Number.isFinite(s) && s >= 0 ? s * 1000 : undefined;
}
