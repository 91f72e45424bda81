import type { Dispatcher } from 'undici';
import { ackRequestOf, parseOptions, routes, type AckDefaults, type AckInput, type AckResult, type LeaseExtendResult, type ScheduleBody, type ScheduleUpsertResult } from '@queen-mq/protocol';
import { queenOptionsSchema } from './options.js';
import { routeCalls, type RouteCalls } from './route-calls.js';
import { QueueHandle } from './queue-handle.js';
import { TransactionBuilder } from './transaction.js';
import { Transport, type RequestOptions } from './transport.js';
import { inSpan, startMessagingSpan, tracingEnabled } from './tracing.js';

/** Options of {@link Queen} (schema: `queenOptionsSchema`; an unknown or mistyped option throws VALIDATION_FAILED). */
export interface QueenOptions {
  /** Broker base URL, e.g. `http://localhost:6632`. */
  url: string;
  /** Sent as `Authorization: Bearer <token>` (API key or JWT) when set. */
  bearerToken?: string;
  /** Per-attempt timeout, ms. A long-poll pop gets its own wait on top. Default 30000. */
  timeoutMs?: number;
  /** Extra attempts for a retryable failure (see README "Retries"). Default 3. */
  retries?: number;
  /** First backoff delay, ms; doubles per attempt, full jitter. Default 100. */
  retryBaseMs?: number;
  /** Largest backoff delay, ms. Default 3000. */
  retryMaxMs?: number;
  /**
   * How long a call that is safe to resend (a GET, an ack, a push whose items
   * all carry a transactionId) keeps being resent while the broker answers
   * 503 DB_UNAVAILABLE / DB_OUTCOME_UNKNOWN (its PostgreSQL fails over or
   * restarts), past `retries`, pausing at most a second between tries.
   * Default 30000; 0 = only `retries`.
   */
  failoverWaitMs?: number;
  /** An undici dispatcher to use instead of the client's own keep-alive Agent. */
  dispatcher?: Dispatcher;
}

/** Options of {@link Queen.ack}: the items' defaults, and a signal. */
export interface AckOptions extends AckDefaults {
  signal?: AbortSignal;
}

/**
 * A client of one broker. Every method goes through {@link Queen.request}:
 * JSON over a keep-alive node:http agent, typed {@link QueenError} on any non-2xx,
 * retries only where resending is safe. Call {@link Queen.close} when done.
 */
export class Queen {
  readonly url: string;
  /**
   * Typed calls for every broker route, by the route table's names
   * (`queen.api.streamsCycle({ body })`, `queen.api.queueGet({ params: { queue } })`):
   * params, query, body and answer typed by the protocol's schemas. Same
   * transport, errors and retries as {@link Queen.request}.
   */
  readonly api: RouteCalls;
  private readonly transport: Transport;
  private readonly bearerToken: string | undefined;

  constructor(options: QueenOptions) {
    parseOptions('new Queen()', queenOptionsSchema, options);
    this.url = options.url;
    this.bearerToken = options.bearerToken;
    this.transport = new Transport({
      url: options.url,
      bearerToken: options.bearerToken,
      timeoutMs: options.timeoutMs ?? 30000,
      retries: options.retries ?? 3,
      baseMs: options.retryBaseMs ?? 100,
      maxMs: options.retryMaxMs ?? 3000,
      failoverWaitMs: options.failoverWaitMs ?? 30000,
      dispatcher: options.dispatcher,
    });
    this.api = routeCalls((method, path, opts) => this.request(method, path, opts));
  }

  /**
   * One JSON call to any broker route (the streams SDK uses it for
   * `/streams/v1/*`). Resolves the parsed body, or `null` for a 204; rejects
   * with a {@link QueenError} carrying the server's `code`, `status`, `details`
   * and other body fields in `extra`; connection failures that outlast the
   * retries reject with the socket's error (it has a `code`).
   */
  request<T = unknown>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    return this.transport.send<T>(method, path, options);
  }

  /** A handle on one queue (created by the broker on first push). */
  queue(name: string): QueueHandle {
    return new QueueHandle(this, name);
  }

  /**
   * Acknowledges one message (POST /api/v1/ack) or many (POST /api/v1/ack/batch,
   * one transaction). Results come back in input order, one per item, with
   * per-item `success`/`code`. Retried on failure: a repeated ack answers
   * `alreadyAcked:true` instead of applying twice.
   */
  async ack(items: AckInput | AckInput[], options: AckOptions = {}): Promise<AckResult[]> {
    const list = Array.isArray(items) ? items : [items];
    if (list.length === 0) return [];
    const { consumerGroup, items: wire } = ackRequestOf(list, options);
    const send = () =>
      (wire.length === 1
        ? this.api.ack({ body: { ...wire[0]!, ...(consumerGroup ? { consumerGroup } : {}) }, idempotent: true, signal: options.signal })
        : this.api.ackBatch({ body: { ...(consumerGroup ? { consumerGroup } : {}), acknowledgments: wire }, idempotent: true, signal: options.signal })) as Promise<AckResult[]>;
    if (!tracingEnabled()) return send();
    // Popped messages name their queue; plain AckInputs may not.
    const queue = (list[0] as { queue?: unknown }).queue;
    const span = startMessagingSpan({ operation: 'ack', queue: typeof queue === 'string' ? queue : undefined, count: list.length, consumerGroup });
    return inSpan(span, send, (results, s) => {
      const refused = results.filter((r) => !r.success).length;
      if (refused > 0) s.setAttribute('queen.ack.refused_count', refused);
    });
  }

  /**
   * Pushes a live lease's expiry to at least now + `seconds` (1..86400,
   * default 60). An expired lease is never revived: the result then has
   * `success:false, code:"LEASE_EXPIRED"` (or `LEASE_NOT_FOUND`).
   */
  async extendLease(leaseId: string, seconds = 60, options: { signal?: AbortSignal } = {}): Promise<LeaseExtendResult> {
    const out = (await this.api.leaseExtend({ params: { leaseId }, body: { seconds }, idempotent: true, signal: options.signal })) as LeaseExtendResult[];
    return out[0]!;
  }

  /**
   * The broker's clock from the `Date` header of GET /health (no database
   * round trip): epoch ms, whole seconds, written before the answer left — a
   * lower bound of the broker's time once this resolves. `undefined` when
   * the answer carried no Date header. One attempt, no retries.
   */
  async brokerDate(options: { signal?: AbortSignal } = {}): Promise<number | undefined> {
    const res = await fetch(this.url.replace(/\/+$/, '') + routes.health.url, {
      headers: this.bearerToken ? { authorization: `Bearer ${this.bearerToken}` } : {},
      signal: options.signal,
    });
    const date = res.headers.get('date');
    await res.arrayBuffer();
    return date ? Date.parse(date) : undefined;
  }

  /**
   * Creates or replaces the recurring schedule `name` (POST /api/v1/schedules):
   * every fire time of `cron` in `timeZone` (default UTC) pushes `payload`
   * to `queue`/`partition` once, with transactionId
   * `schedule:<name>:<fire time ISO>`. `missed` (default `one`) says what a
   * broker coming back after a gap does with the fire times nobody pushed.
   * The same definition again answers `status: 'unchanged'` and keeps its
   * next fire time, so an application may declare its schedules at every
   * start; safe to retry. List and delete with `queen.api.scheduleList()` /
   * `queen.api.scheduleDelete({ params: { name } })`.
   */
  schedule(name: string, definition: Omit<ScheduleBody, 'name'>, options: { signal?: AbortSignal } = {}): Promise<ScheduleUpsertResult> {
    return this.api.scheduleUpsert({ body: { ...definition, name }, idempotent: true, signal: options.signal });
  }

  /** A transaction builder: pushes, acks, KV ops and timers committed together (`.commit()`). */
  transaction(): TransactionBuilder {
    return new TransactionBuilder(this);
  }

  /** Closes the keep-alive connections. */
  close(): Promise<void> {
    return this.transport.close();
  }
}
