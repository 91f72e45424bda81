import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { popQuery, routes, type PopQuery } from '@queen-mq/protocol';
import type { BrokerContext } from './context.js';
import { readableRows } from './pop-unreadable.js';
import { registerRoute } from './http.js';
import { POP_SQL, type PopAnswerRow, type PopRow } from './sql/queen.log_pop_v3.js';
import { TRACEPARENTS_SQL, type TraceparentRow } from './sql/queen.message_traceparents_v1.js';

/** A pop's answer: the body as JSON text, and how many messages it carries. */
type PopOutcome = { kind: 'messages'; body: string; count: number; more: boolean } | { kind: 'empty' } | { kind: 'paused' } | { kind: 'dead-lettered' };

function subscriptionStart(ctx: BrokerContext, q: PopQuery): { mode: string; start: string | null } {
  if (q.subscriptionFrom && q.subscriptionFrom !== 'now') return { mode: 'timestamp', start: q.subscriptionFrom };
  if (q.subscriptionFrom === 'now' || q.subscriptionMode === 'new') return { mode: 'new', start: 'now' };
  if (q.subscriptionMode === 'all') return { mode: 'all', start: null };
  return ctx.config.defaultSubscriptionMode === 'new' ? { mode: 'new', start: 'now' } : { mode: 'all', start: null };
}

/**
 * The claimed messages of a pop statement's rows, in log_pop_v3's order,
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
  const { rows } = await ctx.db.query<PopAnswerRow>(
    POP_SQL,
    [queue, partition, q.consumerGroup, q.batch, partition === null ? q.partitions : 1, q.autoAck, leaseId, sub.mode, sub.start, ctx.config.maxPopBytes || null, askMore],
  );
  if (rows[0]!.paused) return { kind: 'paused' };
  // The pop made the group's missing cursors on the queue's partitions (listing-totals.ts).
  ctx.totals.notePop(queue, q.consumerGroup);
  const { messages, expired } = await claimedOf(ctx, rows);
  if (expired > 0) ctx.metrics.leaseExpired.inc({ queue }, expired);
  if (messages.length === 0) return { kind: 'empty' };
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
  const first = delivered[0]!;
  const body = renderMessages(delivered, dataOf, queue, wireLease, q.consumerGroup);
  return { kind: 'messages', count: delivered.length, more, body: popBody(queue, first.partition_name, first.partition_id, wireLease, q.consumerGroup, partitionCount(delivered), body) };
}

/**
 * Pop with optional long-poll (PROTOCOL §3.8): parked in the wait room
 * (wait-room.ts) until a write it can be fed by, the pop before it in its
 * line finding messages, the room's once-a-second re-check finding its line
 * with messages held back (a lease, a delay), or the timeout.
 * A client disconnect abandons the wait without claiming anything; shutdown
 * answers 204.
 */
export function popRoutes(app: FastifyInstance, ctx: BrokerContext): void {
  const limits = { maxBatch: ctx.config.maxPopBatch, maxTimeoutMs: ctx.config.maxPopTimeoutMs };
  const query = popQuery(limits);
  const handler = async ({ params, query: q, request, reply }: { params: { queue: string; partition?: string }; query: PopQuery; request: any; reply: any }) => {
    const deadline = Date.now() + (q.wait ? q.timeout : 0);
    // The client went away: a parked pop leaves its line at once. Plain
    // listeners, removed once the answer is decided (every request closes).
    let gone = false;
    let leave: (() => void) | undefined;
    const abandon = () => {
      gone = true;
      leave?.();
    };
    request.raw.on('close', abandon);
    reply.raw.on('close', abandon);
    const room = ctx.notifier.room;
    const partition = params.partition ?? null;
    let parked = false;
    /**
     * Parks this pop in its line until it is woken or out of time; true when
     * it should answer 204 at once: the client went away or the broker is
     * shutting down (parked pops are woken to end, not to look again).
     */
    const park = async (): Promise<boolean> => {
      if (!parked) {
        parked = true;
        ctx.metrics.longPollWaiting.inc();
      }
      // Shutdown wakes every parked pop once ctx.shutdown is aborted (broker.ts): one parking after that would wait for nothing.
      if (gone || ctx.shutdown.aborted) return true;
      await room.park(params.queue, q.consumerGroup, partition, deadline - Date.now(), (l) => (leave = l));
      leave = undefined;
      return gone || ctx.shutdown.aborted;
    };
    try {
      // Pops of this line parked before it: each found nothing, and every
      // wake since went to the head of the line, so this pop would find
      // nothing too (a woken head that finds more wakes the next, this one
      // in its turn). It joins the line without asking PostgreSQL. What no
      // wake announces (a lease or delay running out, another broker's ack,
      // pops paused elsewhere) the room's once-a-second re-check finds, for
      // this pop as for those before it (wait-room.ts). In the end-to-end bench
      // a consumer's pop after its ack was a query for nothing about once
      // per push.
      if (q.wait && room.waiting(params.queue, q.consumerGroup, partition) && (await park())) return reply.code(204).send();
      for (;;) {
        const watch = room.watch(params.queue, q.consumerGroup, partition);
        let outcome: PopOutcome;
        try {
          // Whether more is left matters only to a pop parked behind this
          // one; without one the check's PostgreSQL time is saved, and a pop
          // that parks meanwhile is woken as if there were more.
          outcome = await popOnce(ctx, params.queue, partition, q, watch.waiting);
        } finally {
          room.unwatch(watch);
        }
        if (outcome.kind === 'messages') {
          // The next pop parked in this line is woken only when PostgreSQL
          // says there is more for it: a wake-up for nothing costs a pop
          // statement (0.34 ms p25 alone on one connection, against 0.13 ms
          // for `select 1`) and kept consumers busy.
          if (outcome.more) room.wakeNext(params.queue, q.consumerGroup, partition);
          return reply.type('application/json; charset=utf-8').send(outcome.body);
        }
        if (outcome.kind === 'dead-lettered') continue;
        if (outcome.kind === 'paused') {
          reply.header('X-Queen-Pop-Paused', 'true');
          return reply.code(204).send();
        }
        if (!q.wait || deadline <= Date.now() || gone || ctx.shutdown.aborted) return reply.code(204).send();
        // A write that committed after this query began woke no one if no
        // pop was parked then: look again rather than park past it.
        if (room.missedSince(watch)) continue;
        if (await park()) return reply.code(204).send();
      }
    } finally {
      request.raw.removeListener('close', abandon);
      reply.raw.removeListener('close', abandon);
      if (parked) ctx.metrics.longPollWaiting.dec();
    }
  };
  registerRoute(app, { ...routes.popQueue, query }, handler as never);
  registerRoute(app, { ...routes.popPartition, query }, handler as never);
}
