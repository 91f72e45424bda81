import type { Dispatcher } from 'undici';
import { errorFromResponse } from './errors.js';
import { dispatcherPath, nodeHttpPath, type HttpPath } from './http-exchange.js';
import { backoffDelay, isConnectionError, neverSent, retryAfterMs, sleep, type BackoffPolicy } from './retry.js';

export type QueryValue = string | number | boolean | undefined | null;

/** Options of one call through {@link Transport.send}. */
export interface RequestOptions {
  /** JSON body (sent as `application/json`). */
  body?: unknown;
  /** Query string; `undefined`/`null` values are left out. */
  query?: Record<string, QueryValue>;
  /**
   * The call may safely be sent twice (the server deduplicates or the
   * operation is naturally idempotent). Idempotent calls are retried on
   * connection errors and 5xx answers; others only when the connection failed
   * before the request was sent. Default false.
   */
  idempotent?: boolean;
  /** Cancels the call (and any pending retry); the promise rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Overrides the client's per-attempt timeout, ms (a long-poll pop adds its wait to it). */
  timeoutMs?: number;
}

interface TransportOptions extends BackoffPolicy {
  url: string;
  bearerToken?: string;
  timeoutMs: number;
  retries: number;
  /** How long an idempotent call keeps being resent, past `retries`, while the broker answers 503 for its database (a failover). */
  failoverWaitMs: number;
  dispatcher?: Dispatcher;
}

/** The 503s of a broker whose database is away (a failover, a restart): they pass, so an idempotent call waits them out. */
const DATABASE_AWAY = new Set(['DB_UNAVAILABLE', 'DB_OUTCOME_UNKNOWN']);

/** Longest pause between resends while waiting out a failover: a new primary is served within a second of its promotion. */
const FAILOVER_STEP_MAX_MS = 1000;

/** Builds `path?query` with only the defined query values. */
export function withQuery(path: string, query?: Record<string, QueryValue>): string {
  if (!query) return path;
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null) qs.set(k, String(v));
  const s = qs.toString();
  return s ? `${path}?${s}` : path;
}

/**
 * The signal of one attempt: aborted by the caller's signal or after
 * `timeoutMs` (reason: a TimeoutError, as AbortSignal.timeout gives). `done()`
 * removes the listener and the timer. Combining with AbortSignal.any instead
 * would leave an entry per request on a long-lived caller signal (a runner's
 * stop signal) on Node 20, and keep each timeout signal alive for its whole
 * timeout.
 */
function boundnal(caller: AbortSignal | undefined, timeoutMs: number): { signal: AbortSignal; done(): void } {
  const controller = new AbortController();
  const onAbort = () => controller.abort(caller!.reason);
  const timer = setTimeout(() => controller.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError')), timeoutMs);
  timer.unref(); // like AbortSignal.timeout: the request's socket is what keeps the process alive
  if (caller?.aborted) controller.abort(caller.reason);
  else caller?.addEventListener('abort', onAbort, { once: true });
  return {
    signal: controller.signal,
    done() {
      clearTimeout(timer);
      caller?.removeEventListener('abort', onAbort);
    },
  };
}

/**
 * JSON over HTTP with the retry rules of the client: one keep-alive agent
 * per client (node:http, or the caller's undici dispatcher), a per-attempt
 * timeout of our own that also governs long-poll pops, catalogue errors for
 * non-2xx.
 */
export class Transport {
  readonly origin: string;
  private readonly http: HttpPath;

  constructor(private readonly options: TransportOptions) {
    this.origin = options.url.replace(/\/+$/, '');
    this.http = options.dispatcher ? dispatcherPath(options.dispatcher) : nodeHttpPath(this.origin);
  }

  async send<T>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
    const url = this.origin + withQuery(path, opts.query);
    const headers: Record<string, string> = { accept: 'application/json' };
    if (opts.body !== undefined) headers['content-type'] = 'application/json';
    if (this.options.bearerToken) headers.authorization = `Bearer ${this.options.bearerToken}`;
    const body = opts.body === undefined ? undefined : JSON.stringify(opts.body);
    const timeoutMs = opts.timeoutMs ?? this.options.timeoutMs;

    const started = Date.now();
    for (let attempt = 0; ; attempt++) {
      const canRetry = attempt < this.options.retries;
      let status: number;
      let text: string;
      const bound = boundnal(opts.signal, timeoutMs);
      try {
        ({ status, text } = await this.http.exchange(method, url, headers, body, bound.signal));
      } catch (err) {
        if (opts.signal?.aborted) throw opts.signal.reason;
        const retry = canRetry && (neverSent(err) || (opts.idempotent === true && isConnectionError(err)));
        if (!retry) throw err;
        await sleep(backoffDelay(attempt, this.options), opts.signal);
        continue;
      } finally {
        bound.done();
      }

      if (status >= 200 && status < 300) {
        if (status === 204 || text === '') return null as T;
        return JSON.parse(text) as T;
      }
      if (status >= 500 && opts.idempotent === true && canRetry) {
        await sleep(backoffDelay(attempt, this.options), opts.signal);
        continue;
      }
      let parsed: unknown;
      try {
        parsed = text ? JSON.parse(text) : undefined;
      } catch {
        parsed = undefined;
      }
      if (
        status === 503 &&
        opts.idempotent === true &&
        DATABASE_AWAY.has((parsed as { code?: string } | undefined)?.code ?? '') &&
        Date.now() - started < this.options.failoverWaitMs
      ) {
        await sleep(backoffDelay(attempt, { baseMs: this.options.baseMs, maxMs: Math.min(this.options.maxMs, FAILOVER_STEP_MAX_MS) }), opts.signal);
        continue;
      }
      if (status === 429 && canRetry) {
        // 429 (QUEUE_FULL) stored nothing, so any call may be sent again:
        // after the wait the broker asks for (at most retryMaxMs), never
        // sooner than the backoff.
        await sleep(Math.max(backoffDelay(attempt, this.options), Math.min(retryAfterMs(parsed) ?? 0, this.options.maxMs)), opts.signal);
        continue;
      }
      throw errorFromResponse(status, parsed, text);
    }
  }

  async close(): Promise<void> {
    await this.http.close();
  }
}
