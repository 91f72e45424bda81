import type { FastifyInstance } from 'fastify';
import { adminRoutes, errorMessage, type DlqIdsBody, type DlqQuery } from '@queen-mq/protocol';
import type { BrokerContext } from './context.js';
import { readPayload } from './encryption.js';
import { registerRoute } from './http.js';
import { tally } from './metrics.js';

interface DlqRow {
  id: string;
  transactionId: string;
  partitionId: string;
  queue: string;
  partition: string;
  consumerGroup: string;
  errorMessage: string | null;
  retryCount: number;
  data: unknown;
  encrypted: Buffer | null;
  producerSub: string | null;
  createdAt: string;
  failedAt: string;
  offset: string;
  total: string;
}

/**
 * GET /api/v1/dlq (PROTOCOL §5.8): newest failure first, with the message's
 * identity and payload read from the retained message (a DLQ entry lives as
 * long as its message), and the total matching count for pagination.
 */
async function listDlq(ctx: BrokerContext, q: DlqQuery) {
  const { rows } = await ctx.db.query<DlqRow>(
    `select m.id, coalesce(m.transaction_id, m.id::text) as "transactionId", d.partition_id as "partitionId", p.queue_name as queue,
            p.name as partition, d.consumer_group as "consumerGroup", d.error_message as "errorMessage",
            d.retry_count as "retryCount", m.payload as data, m.encrypted, m.producer_sub as "producerSub",
            queen.iso(m.created_at) as "createdAt", queen.iso(d.failed_at) as "failedAt", d.msg_offset::text as offset,
            count(*) over () as total
       from queen.dlq d
       join queen.partitions p on p.id = d.partition_id
       join queen.messages m on m.partition_id = d.partition_id and m.msg_offset = d.msg_offset
      where ($1::text is null or p.queue_name = $1)
        and ($2::text is null or d.consumer_group = $2)
        and ($3::text is null or p.name = $3)
      order by d.failed_at desc, d.id desc
      limit $4 offset $5`,
    [q.queue ?? null, q.consumerGroup ?? null, q.partition ?? null, q.limit, q.offset],
  );
  let total = rows[0] ? Number(rows[0].total) : 0;
  if (!rows[0] && q.offset > 0) {
    // Past the last page: the window function saw no rows, count separately.
    const { rows: c } = await ctx.db.query<{ n: string }>(
      `select count(*) as n from queen.dlq d
         join queen.partitions p on p.id = d.partition_id
         join queen.messages m on m.partition_id = d.partition_id and m.msg_offset = d.msg_offset
        where ($1::text is null or p.queue_name = $1) and ($2::text is null or d.consumer_group = $2) and ($3::text is null or p.name = $3)`,
      [q.queue ?? null, q.consumerGroup ?? null, q.partition ?? null],
    );
    total = Number(c[0]!.n);
  }
  return {
    messages: rows.map(({ total: _total, encrypted, ...m }) => ({ ...m, data: readPayload(ctx, { payload: m.data, encrypted, id: m.id }) })),
    pagination: { limit: q.limit, offset: q.offset },
    total,
  };
}

interface TakenRow {
  id: string;
  partitionId: string;
  offset: string;
  queue: string;
  partition: string;
  entries: number;
}

const notFound = (index: number, id: string) => ({
  index,
  id,
  success: false,
  code: 'MESSAGE_NOT_FOUND' as const,
  error: errorMessage('MESSAGE_NOT_FOUND'),
  queue: null,
  partition: null,
  partitionId: null,
  entriesDeleted: 0,
  messageId: null,
  offset: null,
});

/**
 * POST /api/v1/dlq/requeue (extension). In one transaction: the append locks
 * of the messages' partitions (PROTOCOL §4 rank 4, ascending), then their DLQ
 * entries are deleted (of every group, or of `consumerGroup` only), then each
 * message is pushed again to its own partition through the allocator
 * (queen.log_push_many_v1): a new id and offset at the head, the same payload
 * (ciphertext as stored on an encrypted queue) and traceId, no transactionId
 * of its own (the original is still retained, so reusing it would be a
 * duplicate), producerSub = the caller. Every consumer group of the queue sees
 * the new message. A message requeued by a concurrent request is reported
 * MESSAGE_NOT_FOUND here: its entries were gone once the locks were ours.
 */
async function requeueDlq(ctx: BrokerContext, body: DlqIdsBody, producerSub: string | null) {
  const ids = body.ids.map((id) => id.toLowerCase());
  const group = body.consumerGroup ?? null;
  const { taken, pushed } = await ctx.db.transaction(async (client) => {
    const { rows: parts } = await client.query<{ pid: string }>(
      `select distinct d.partition_id as pid from queen.dlq d
         join queen.messages m on m.partition_id = d.partition_id and m.msg_offset = d.msg_offset
        where m.id = any($1::uuid[]) and ($2::text is null or d.consumer_group = $2)`,
      [ids, group],
    );
    if (!parts.length) return { taken: [] as TakenRow[], pushed: [] as { message_id: string; offset: string }[] };
    await client.query('select 1 from queen.partitions where id = any($1::uuid[]) order by id for update', [parts.map((p) => p.pid)]);
    // Under the append locks retention can neither drop these messages nor their entries.
    const { rows: taken } = await client.query<TakenRow>(
      `with del as (
         delete from queen.dlq d using queen.messages m
          where m.partition_id = d.partition_id and m.msg_offset = d.msg_offset
            and m.id = any($1::uuid[]) and ($2::text is null or d.consumer_group = $2)
         returning m.id, d.partition_id, d.msg_offset
       )
       select del.id::text as id, del.partition_id as "partitionId", del.msg_offset::text as offset,
              p.queue_name as queue, p.name as partition, count(*)::int as entries
         from del join queen.partitions p on p.id = del.partition_id
        group by del.id, del.partition_id, del.msg_offset, p.queue_name, p.name`,
      [ids, group],
    );
    if (!taken.length) return { taken, pushed: [] as { message_id: string; offset: string }[] };
    const order = new Map(ids.map((id, i) => [id, i] as const));
    taken.sort((a, b) => order.get(a.id)! - order.get(b.id)!);
    const { rows: pushed } = await client.query<{ message_id: string; offset: string }>(
      `select r.message_id, r."offset"::text as offset
         from queen.log_push_many_v1(
                (select jsonb_agg(jsonb_build_object('partition_id', m.partition_id, 'payload', m.payload, 'trace_id', m.trace_id)
                                  || case when m.encrypted is null then '{}'::jsonb else jsonb_build_object('encrypted', encode(m.encrypted, 'base64')) end
                                  order by u.ord)
                   from unnest($1::uuid[], $2::bigint[]) with ordinality as u(pid, off, ord)
                   join queen.messages m on m.partition_id = u.pid and m.msg_offset = u.off),
                $3) with ordinality as r(status, message_id, "offset", n)
        order by r.n`,
      [taken.map((t) => t.partitionId), taken.map((t) => t.offset), producerSub],
    );
    return { taken, pushed };
  });
  const byId = new Map(taken.map((t, i) => [t.id, { ...t, ...pushed[i]! }] as const));
  const perQueue = new Map<string, number>();
  for (const t of taken) tally(perQueue, t.queue);
  for (const [queue, n] of perQueue) {
    ctx.notifier.notify(queue);
    ctx.metrics.pushed.inc({ queue }, n);
  }
  const seen = new Set<string>();
  const results = ids.map((id, index) => {
    const t = byId.get(id);
    // A repeated id names the same entries: the first occurrence requeued them.
    if (!t || seen.has(id)) return notFound(index, id);
    seen.add(id);
    return {
      index,
      id,
      success: true,
      code: null,
      error: null,
      queue: t.queue,
      partition: t.partition,
      partitionId: t.partitionId,
      entriesDeleted: t.entries,
      messageId: t.message_id,
      offset: t.offset,
    };
  });
  return { success: true as const, requeued: taken.length, results };
}

/**
 * POST /api/v1/dlq/delete (extension): removes the DLQ entries of the named
 * messages (every group, or `consumerGroup` only). The messages stay in the
 * log until retention; cursors do not move.
 */
async function deleteDlq(ctx: BrokerContext, body: DlqIdsBody) {
  const ids = body.ids.map((id) => id.toLowerCase());
  const { rows } = await ctx.db.query<{ id: string; n: number }>(
    `with del as (
       delete from queen.dlq d using queen.messages m
        where m.partition_id = d.partition_id and m.msg_offset = d.msg_offset
          and m.id = any($1::uuid[]) and ($2::text is null or d.consumer_group = $2)
       returning m.id
     )
     select id::text as id, count(*)::int as n from del group by id`,
    [ids, body.consumerGroup ?? null],
  );
  const counts = new Map(rows.map((r) => [r.id, r.n] as const));
  const seen = new Set<string>();
  const results = ids.map((id, index) => {
    const n = seen.has(id) ? 0 : (counts.get(id) ?? 0);
    seen.add(id);
    return { index, id, success: n > 0, code: n > 0 ? null : 'MESSAGE_NOT_FOUND', entriesDeleted: n };
  });
  return { success: true as const, deleted: rows.reduce((s, r) => s + r.n, 0), results };
}

export function dlqRoutes(app: FastifyInstance, ctx: BrokerContext): void {
  registerRoute(app, adminRoutes.dlq, async ({ query }) => listDlq(ctx, query));
  registerRoute(app, adminRoutes.dlqRequeue, async ({ body, request }) => requeueDlq(ctx, body, request.principal?.subject ?? null));
  registerRoute(app, adminRoutes.dlqDelete, async ({ body }) => deleteDlq(ctx, body));
}
