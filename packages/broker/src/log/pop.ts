import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { popQuery, routes, type PopQuery } from '@queen-mq/protocol';
import type { BrokerContext } from '../context/context.js';
import { readableRows } from './pop-unreadable.js';
import { registerRoute } from '../http/http.js';
import { Waiter } from '../wait/wait-room.js';
import { POP_SQL, type PopAnswerRow, type PopRow } from '../sql/queen.log_pop_v4.js';
import { TRACEPARENTS_SQL, type TraceparentRow } from '../sql/queen.message_traceparents_v1.js';
import { claimTurn, noteClaim } from './claim-turns.js';

/** A pop's answer: the body as JSON text, and how many messages it carries. */
type PopOutcome = { kind: 'messages'; body: string; count: number; more: boolean } | { kind: 'empty' } | { kind: 'paused' } | { kind: 'dead-lettered' };

function subscriptionStart(ctx: BrokerContext, q: PopQuery): { mode: string; start: string | null } {
  if (q.subscriptionFrom && q.subscriptionFrom !== 'now') return { mode: 'timestamp', start: q.subscriptionFrom };
  if (q.subscriptionFrom === 'now' || q.subscriptionMode === 'new') return { mode: 'new', start: 'now' };
  if (q.subscriptionMode === 'all') return { mode: 'all', start: null };
  return ctx.config.defaultSubscriptionMode === 'new' ? { mode: 'new', start: 'now' } : { mode: 'all', start: null };
}

/**
 * The claimed messages of a pop statement's rows, in log_pop_v4's order,
 * with their traceparents; and the expired leases it released.
 */
async function claimedOf(ctx: BrokerContext, rows: PopAnswerRow[]): Promise<{ messages: PopAnswerRow[]; expired: number }> {
  let expired = 0;
  let ordered = true;
  let traced = false;
  const messages: PopAnswerRow[] = [];
  for (const r of rows) {
    if (r.lease_expired) expired += r.lease_expired;
    if (r.msg_offset === null) continue;
    if (messages.length > 0 && Number(r.n) < Number(messages[messages.length - 1]!.n)) ordered = false;
    if (r.trace_id !== null) traced = true;
    messages.push(r);
  }
  // A lateral join hands the function's rows on in their order; checked, not assumed.
  if (!ordered) messages.sort((a, b) => Number(a.n) - Number(b.n));
  if (traced) {
    const mine = messages.filter((m) => m.trace_id !== null);
    const { rows: found } = await ctx.db.query<TraceparentRow>(
      TRACEPARENTS_SQL,
      [mine.map((m) => m.partition_id), mine.map((m) => m.msg_offset)],
    );
    const byKey = new Map(found.map((f) => [`${f.partition_id}/${f.msg_offset}`, f.traceparent]));
    for (const m of mine) m.traceparent = byKey.get(`${m.partition_id}/${m.msg_offset}`) ?? null;
  }
  return { messages, expired };
}

/** How many partitions a pop's messages come from (they come in runs of one partition). */
function partitionCount(rows: { partition_id: string }[]): number {
  let n = 0;
  let last: string | null = null;
  for (const r of rows) if (r.partition_id !== last) (last = r.partition_id), n++;
  return n;
}

/** A JSON string, or null. */
const jsonOrNull = (text: string | null): string => (text === null ? 'null' : JSON.stringify(text));

/**
 * The messages array of a pop's answer (PoppedMessage, fields in the order
 * Queen's clients see them), written out as text: `dataOf` gives each
 * message's data as JSON text (by its index), which goes in as it is.
 */
function renderMessages<R extends Omit<PopRow, 'payload'>>(
  rows: R[], dataOf: (row: R, index: number) => string, queue: string, leaseId: string, group: string,
): string {
  const shared = `,"queue":${JSON.stringify(queue)},"leaseId":${JSON.stringify(leaseId)},"consumerGroup":${JSON.stringify(group)}`;
  // A pop's messages come in runs of one partition: its two fields are written once per run.
  let partitionId: string | null = null;
  let partitionFields = '';
  let out = '';
  rows.forEach((r, index) => {
    if (r.partition_id !== partitionId) {
      partitionId = r.partition_id;
      partitionFields = `","partitionId":"${partitionId}","partition":${JSON.stringify(r.partition_name)}${shared}`;
    }
    out += `${out === '' ? '[' : ','}{"id":"${r.id}","transactionId":${JSON.stringify(r.transaction_id)},"traceId":${r.trace_id === null ? 'null' : `"${r.trace_id}"`},"traceparent":${jsonOrNull(r.traceparent)},"data":${dataOf(r, index)},"producerSub":${jsonOrNull(r.producer_sub)},"createdAt":"${r.created_at}${partitionFields},"offset":"${r.msg_offset}","retryCount":${r.retry_count}}`;
  });
  return out === '' ? '[]' : `${out}]`;
}

/** The answer's fields around its messages, in the order Queen's clients see them. */
function popBody(queue: string, firstName: string, firstId: string, leaseId: string, group: string, claimed: number, messagesJson: string): string {
  return `{"success":true,"queue":${JSON.stringify(queue)},"partition":${JSON.stringify(firstName)},"partitionId":${JSON.stringify(firstId)},"leaseId":${JSON.stringify(leaseId)},"consumerGroup":${JSON.stringify(group)},"partitionsClaimed":${claimed},"messages":${messagesJson}}`;
}

/**
 * One claim attempt, no waiting, in one round trip. An unknown queue or
 * partition claims nothing and creates nothing. Payloads stored encrypted
 * are decrypted here (encryption.ts).
 */
async function popOnce(ctx: BrokerContext, queue: string, partition: string | null, q: PopQuery, askMore: boolean): Promise<PopOutcome> {
  const leaseId = randomUUID();
  const wireLease = q.autoAck ? '' : leaseId;
  const sub = subscriptionStart(ctx, q);
  const turn = partition === null ? claimTurn(ctx, queue, q.consumerGroup) : null;
  const { rows } = await ctx.db.query<PopAnswerRow>(
    POP_SQL,
    [queue, partition, q.consumerGroup, q.batch, partition === null ? q.partitions : 1, q.autoAck, leaseId, sub.mode, sub.start, ctx.config.maxPopBytes || null, askMore,
      turn?.after ?? null, turn?.again ?? null],
  );
  if (rows[0]!.paused) return { kind: 'paused' };
  // The pop made the group's missing cursors on the queue's partitions (listing-totals.ts).
  ctx.totals.notePop(queue, q.consumerGroup);
  const { messages, expired } = await claimedOf(ctx, rows);
  if (expired > 0) ctx.metrics.leaseExpired.inc({ queue }, expired);
  if (messages.length === 0) return { kind: 'empty' };
  if (turn) noteClaim(ctx, queue, q.consumerGroup, turn, messages);
  // Leased (or, auto-acked, consumed): the listing totals recount these partitions.
  ctx.totals.touch(messages.map((m) => m.partition_id));
  // Whether more is left was asked only for a pop parked behind this one (else as if there were).
  const more = messages[0]!.more ?? true;
  // Payloads stored as JSON go into the answer as their text; encrypted ones
  // are decrypted, and those that cannot be are dead-lettered (pop-unreadable.ts).
  let delivered: Omit<PopRow, 'payload'>[] = messages;
  let dataOf = (_: unknown, i: number) => messages[i]!.payload ?? 'null';
  if (messages.some((r) => r.encrypted !== null)) {
    const claimed = messages.map((r) => ({ ...r, payload: r.payload === null ? null : (JSON.parse(r.payload) as unknown) }));
    const readable = await readableRows(ctx, queue, claimed, q, leaseId);
    // Only undeliverable messages, now dead-lettered: the partition has moved on, claim again.
    if (readable.delivered.length === 0 && readable.deadLettered > 0) return { kind: 'dead-lettered' };
    delivered = readable.delivered;
    dataOf = (_, i) => JSON.stringify(readable.data[i]) ?? 'null';
  }
  ctx.metrics.delivered.inc({ queue }, delivered.length);
  ctx.metrics.history.add(queue, q.consumerGroup, 'popped', delivered.length);
  // Consumed by the pop itself: no ack will count them.
  if (q.autoAck) ctx.metrics.history.add(queue, q.consumerGroup, 'acked', delivered.length);
  const first = delivered[0]!;
  const body = renderMessages(delivered, dataOf, queue, wireLease, q.consumerGroup);
  return { kind: 'messages', count: delivered.length, more, body: popBody(queue, first.partition_name, first.partition_id, wireLease, q.consumerGroup, partitionCount(delivered), body) };
}

/**
 * One pop request from its validation to its answer (PROTOCOL §3.8): claims
 * at once, or, with `wait`, parks in its line of the wait room
 * (wait-room.ts) until a write it can be fed by, the pop before it in its
 * line finding messages, the room's once-a-second re-check finding its line
 * with messages held back (a lease, a delay), or the timeout; then claims
 * again. A client disconnect abandons the wait without claiming anything;
 * shutdown answers 204.
 *
 * An object with methods rather than an async function awaiting the room:
 * while it is parked, this object (its own place in the line: a Waiter) is
 * all it holds (the socket and the request are Node's and fastify's). Each
 * suspended async frame with its promise is held by every parked pop, and
 * thousands of pops may park on as many queues.
 */
class PendingPop extends Waiter {
  private readonly partition: string | null;
  /** The client went away. */
  private gone = false;
  /** Counted in the long-poll gauge (once parked, until answered). */
  private parked = false;
  private answered = false;
  /** The listener of the request's and the response's 'close' (bound: half a closure's size). */
  private readonly onClose = this.abandon.bind(this);

  constructor(
    private readonly ctx: BrokerContext,
    private readonly queue: string,
    partition: string | undefined,
    private readonly q: PopQuery,
    request: FastifyRequest,
    private readonly reply: FastifyReply,
  ) {
    super();
    // The Waiter's deadline: the room's timeout, and the loop's.
    this.deadline = performance.now() + (q.wait ? q.timeout : 0);
    this.partition = partition ?? null;
    // Plain listeners, removed once the answer is decided (every request closes).
    request.raw.on('close', this.onClose);
    reply.raw.on('close', this.onClose);
  }

  /** The client went away: a parked pop leaves its line at once (nothing when it is not parked). */
  private abandon(): void {
    this.gone = true;
    this.ctx.notifier.room.leave(this);
  }

  start(): void {
    // Pops of this line parked before it: each found nothing, and every
    // wake since went to the head of the line, so this pop would find
    // nothing too (a woken head that finds more wakes the next, this one
    // in its turn). It joins the line without asking PostgreSQL. What no
    // wake announces (a lease or delay running out, another broker's ack,
    // pops paused elsewhere) the room's once-a-second re-check finds, for
    // this pop as for those before it (wait-room.ts). In the end-to-end bench
    // a consumer's pop after its ack was a query for nothing about once
    // per push.
    if (this.q.wait && this.ctx.notifier.room.waiting(this.queue, this.q.consumerGroup, this.partition)) this.park();
    else void this.claim();
  }

  /** Woken by the room (a write, the re-check, the pop ahead, the timeout) or let out (the client went away). */
  wake(): void {
    // Shutdown wakes every parked pop once ctx.shutdown is aborted (broker.ts): they end, not look again.
    if (this.gone || this.ctx.shutdown.aborted) return this.answer(204);
    // After the room's wake-up is done, as an awaited wait would: the
    // pop's query then sees the line as the wake left it.
    queueMicrotask(() => void this.claim());
  }

  /** Claims until there is something to answer, or parks. */
  private async claim(): Promise<void> {
    const { ctx, queue, partition, q } = this;
    const room = ctx.notifier.room;
    try {
      for (;;) {
        const watch = room.watch(queue, q.consumerGroup, partition);
        let outcome: PopOutcome;
        try {
          // Whether more is left matters only to a pop parked behind this
          // one; without one the check's PostgreSQL time is saved, and a pop
          // that parks meanwhile is woken as if there were more.
          outcome = await popOnce(ctx, queue, partition, q, watch.waiting);
        } finally {
          room.unwatch(watch);
        }
        if (outcome.kind === 'messages') {
          // The next pop parked in this line is woken only when PostgreSQL
          // says there is more for it: a wake-up for nothing costs a pop
          // statement (several times a bare round trip) and kept consumers
          // busy.
          if (outcome.more) room.wakeNext(queue, q.consumerGroup, partition);
          return this.answer(200, outcome.body);
        }
        if (outcome.kind === 'dead-lettered') continue;
        if (outcome.kind === 'paused') {
          this.reply.header('X-Queen-Pop-Paused', 'true');
          return this.answer(204);
        }
        if (!q.wait || this.deadline <= performance.now() || this.gone || ctx.shutdown.aborted) return this.answer(204);
        // A write that committed after this query began woke no one if no
        // pop was parked then: look again rather than park past it.
        if (room.missedSince(watch)) continue;
        return this.park();
      }
    } catch (err) {
      this.fail(err);
    }
  }

  /** Parks this pop in its line until it is woken or out of time (then {@link wake}). */
  private park(): void {
    if (!this.parked) {
      this.parked = true;
      this.ctx.metrics.longPollWaiting.inc();
    }
    // Shutdown wakes every parked pop once ctx.shutdown is aborted (broker.ts): one parking after that would wait for nothing.
    if (this.gone || this.ctx.shutdown.aborted) return this.answer(204);
    this.ctx.notifier.room.enter(this.queue, this.q.consumerGroup, this.partition, this);
  }

  private settle(): boolean {
    if (this.answered) return false;
    this.answered = true;
    this.reply.request.raw.removeListener('close', this.onClose);
    this.reply.raw.removeListener('close', this.onClose);
    if (this.parked) this.ctx.metrics.longPollWaiting.dec();
    return true;
  }

  /**
   * Answers, once. Nothing here throws: the room may be waking other pops
   * around this call. What reply.send throws goes to the app's error
   * handler, as an async handler's rejection would.
   */
  private answer(status: 200 | 204, body?: string): void {
    if (!this.settle()) return;
    try {
      if (status === 200) this.reply.type('application/json; charset=utf-8').send(body);
      else this.reply.code(204).send();
    } catch (err) {
      this.sendError(err);
    }
  }

  /** An error answers through the app's error handler. */
  private fail(err: unknown): void {
    if (this.settle()) this.sendError(err);
  }

  private sendError(err: unknown): void {
    try {
      this.reply.send(err);
    } catch (again) {
      this.ctx.log.error({ err: again }, 'pop answer not sent');
    }
  }
}

/**
 * The same query as one object literal: zod builds its output a property at
 * a time, past the object's room for them, into a separate property array
 * (0.2 KB in all, kept by a parked pop; this is 0.09 KB).
 */
function compact(q: PopQuery): PopQuery {
  const { batch, wait, timeout, consumerGroup, autoAck, partitions, subscriptionMode, subscriptionFrom } = q;
  return { batch, wait, timeout, consumerGroup, autoAck, partitions, subscriptionMode, subscriptionFrom };
}

/** The pop routes: a PendingPop each; the handler returns nothing and the pop answers through `reply` (http.ts). */
export function popRoutes(app: FastifyInstance, ctx: BrokerContext): void {
  const limits = { maxBatch: ctx.config.maxPopBatch, maxTimeoutMs: ctx.config.maxPopTimeoutMs };
  const query = popQuery(limits);
  const handler = ({ params, query: q, request, reply }: { params: { queue: string; partition?: string }; query: PopQuery; request: FastifyRequest; reply: FastifyReply }): void => {
    new PendingPop(ctx, params.queue, params.partition, compact(q), request, reply).start();
  };
  registerRoute(app, { ...routes.popQueue, query }, handler as never);
  registerRoute(app, { ...routes.popPartition, query }, handler as never);
}
