import { Agent, request as undiciRequest, type Dispatcher } from 'undici';
import { errorFromResponse } from './errors.js';
import { backoffDelay, isConnectionError, neverSent, sleep, type BackoffPolicy } from './retry.js';

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

export interface TransportOptions extends BackoffPolicy {
  url: string;
  bearerToken?: string;
  timeoutMs: number;
  retries: number;
  dispatcher?: Dispatcher;
}

/** Builds `path?query` with only the defined query values. */
export function withQuery(path: string, query?: Record<string, QueryValue>): string {
  if (!query) return path;
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null) qs.set(k, String(v));
  const s = qs.toString();
  return s ? `${path}?${s}` : path;
}

/**
 * JSON over undici with the retry rules of the client: one keep-alive agent
 * per client, a per-attempt timeout of our own (undici's header/body timeouts
 * are off so long-poll pops are governed by it), catalogue errors for non-2xx.
 */
export class Transport {
  readonly origin: string;
  private readonly dispatcher: Dispatcher;
  private readonly ownsDispatcher: boolean;

  constructor(private readonly options: TransportOptions) {
    this.origin = options.url.replace(/\/+$/, '');
    this.ownsDispatcher = !options.dispatcher;
    this.dispatcher = options.dispatcher ?? new Agent({ headersTimeout: 0, bodyTimeout: 0, keepAliveTimeout: 4000 });
  }

  async send<T>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
    const url = this.origin + withQuery(path, opts.query);
    const headers: Record<string, string> = { accept: 'application/json' };
    if (opts.body !== undefined) headers['content-type'] = 'application/json';
    if (this.options.bearerToken) headers.authorization = `Bearer ${this.options.bearerToken}`;
    const body = opts.body === undefined ? undefined : JSON.stringify(opts.body);
    const timeoutMs = opts.timeoutMs ?? this.options.timeoutMs;

    for (let attempt = 0; ; attempt++) {
      const canRetry = attempt < this.options.retries;
      let status: number;
      let text: string;
      try {
        const signal = opts.signal ? AbortSignal.any([opts.signal, AbortSignal.timeout(timeoutMs)]) : AbortSignal.timeout(timeoutMs);
        const res = await undiciRequest(url, { method: method as Dispatcher.HttpMethod, headers, body, signal, dispatcher: this.dispatcher });
        status = res.statusCode;
        text = await res.body.text();
      } catch (err) {
        if (opts.signal?.aborted) throw opts.signal.reason;
        const retry = canRetry && (neverSent(err) || (opts.idempotent === true && isConnectionError(err)));
        if (!retry) throw err;
        await sleep(backoffDelay(attempt, this.options), opts.signal);
        continue;
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
      throw errorFromResponse(status, parsed, text);
    }
  }

  async close(): Promise<void> {
    if (this.ownsDispatcher) await this.dispatcher.close();
  }
}
