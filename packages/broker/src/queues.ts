import type { FastifyInstance } from 'fastify';
import { QueenError, routes } from '@queen-mq/protocol';
import type { BrokerContext } from './context.js';
import { registerRoute } from './http.js';
import { NAME_MATCHES } from './listing-search.js';

export function queueRoutes(app: FastifyInstance, ctx: BrokerContext): void {
  // Listings are paged (?limit=&offset=, PROTOCOL §5.10) and searchable by
  // name (?search=, extension): a broker with many queues or partitions
  // never builds one unbounded answer, and the page's partition counts are
  // counted for the page only.
  registerRoute(app, routes.queueList, async ({ query }) => {
    const search = query.search || null;
    const { rows } = await ctx.db.query(
      `select q.name, q.namespace, q.task, (select count(*)::int from queen.partitions p where p.queue_id = q.id) as partitions,
              queen.iso(q.created_at) as "createdAt"
         from queen.queues q where ${NAME_MATCHES('q.name', '$3')} order by q.name limit $1 offset $2`,
      [query.limit, query.offset, search],
    );
    const { rows: count } = await ctx.db.query<{ n: number }>(`select count(*)::int as n from queen.queues q where ${NAME_MATCHES('q.name', '$1')}`, [search]);
    return { queues: rows, pagination: { limit: query.limit, offset: query.offset }, total: count[0]!.n };
  });

  registerRoute(app, routes.queueGet, async ({ params, query }) => {
    const { rows } = await ctx.db.query<{ id: string; namespace: string | null; task: string | null; options: Record<string, unknown> }>(
      'select id, namespace, task, options from queen.queues where name = $1',
      [params.queue],
    );
    const queue = rows[0];
    if (!queue) throw new QueenError('QUEUE_NOT_FOUND', `Queue ${params.queue} not found`);
    const { rows: partitions } = await ctx.db.query(
      `select p.id, p.name, p.first_offset::text as "firstOffset", p.head_offset::text as "headOffset",
              (select count(*)::int from queen.log_segments s where s.partition_id = p.id) as segments,
              queen.iso(p.created_at) as "createdAt", queen.iso(p.last_activity) as "lastActivity"
         from queen.partitions p where p.queue_id = $1 order by p.name limit $2 offset $3`,
      [queue.id, query.limit, query.offset],
    );
    const { rows: count } = await ctx.db.query<{ n: number }>('select count(*)::int as n from queen.partitions where queue_id = $1', [queue.id]);
    return {
      queue: params.queue,
      queueId: queue.id,
      namespace: queue.namespace,
      task: queue.task,
      options: queue.options,
      partitions,
      pagination: { limit: query.limit, offset: query.offset },
      partitionCount: count[0]!.n,
    };
  });
}
