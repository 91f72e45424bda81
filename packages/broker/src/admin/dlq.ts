import type { FastifyInstance } from 'fastify';
import { adminRoutes, type DlqIdsBody, type DlqQuery } from '@queen-mq/protocol';
import type { BrokerContext } from '../context/context.js';
import { readPayload } from '../log/encryption.js';
import { requeueDlq } from './dlq-requeue.js';
import { registerRoute } from '../http/http.js';

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

/**
 * POST /api/v1/dlq/delete (extension): removes the DLQ entries of the named
 * messages (every group, or `consumerGroup` only). The messages stay in the
 * log until retention; cursors do not move.
 */
async function deleteDlq(ctx: BrokerContext, body: DlqIdsBody) {
  const ids = body.ids.map((id) => id.toLowerCase());
  const { rows } = await ctx.db.query<{ id: string; n: number; partition_id: string }>(
    `with del as (
       delete from queen.dlq d using queen.messages m
        where m.partition_id = d.partition_id and m.msg_offset = d.msg_offset
          and m.id = any($1::uuid[]) and ($2::text is null or d.consumer_group = $2)
       returning m.id, m.partition_id
     )
     select id::text as id, partition_id, count(*)::int as n from del group by id, partition_id`,
    [ids, body.consumerGroup ?? null],
  );
  ctx.totals.touch(rows.map((r) => r.partition_id));
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
