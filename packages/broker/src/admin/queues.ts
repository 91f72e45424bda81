import type { FastifyInstance } from 'fastify';
import { QueenError, routes } from '@queen-mq/protocol';
import type { BrokerContext } from '../context/context.js';
import { registerRoute } from '../http/http.js';
import { NAME_MATCHES } from './listing-search.js';
import { readWithTotals } from '../maintenance/listing-totals.js';

export function queueRoutes(app: FastifyInstance, ctx: BrokerContext): void {
  // Listings are paged (?limit=&offset=, PROTOCOL §5.10) and searchable by
  // name (?search=, extension): a broker with many queues or partitions
  // never builds one unbounded answer. A queue's partition count is its
  // listing totals' (listing-totals.ts): one row per queue on the page,
  // whatever the number of its partitions.
  registerRoute(app, routes.queueList, async ({ query }) => {
    const search = query.search || null;
    const rows = await readWithTotals(ctx.totals, async () =>
      (await ctx.db.query<{ name: string; namespace: string | null; task: string | null; partitions: number; createdAt: string; uncounted: boolean }>(
        `select q.name, q.namespace, q.task, coalesce(t.partitions, 0) as partitions, queen.iso(q.created_at) as "createdAt", t.queue_id is null as uncounted
           from queen.queues q left join queen.queue_totals t on t.queue_id = q.id
          where ${NAME_MATCHES('q.name', '$3')} order by q.name limit $1 offset $2`,
        [query.limit, query.offset, search],
      )).rows,
    );
    const { rows: count } = await ctx.db.query<{ n: number }>(`select count(*)::int as n from queen.queues q where ${NAME_MATCHES('q.name', '$1')}`, [search]);
    return { queues: rows.map(({ uncounted: _, ...q }) => q), pagination: { limit: query.limit, offset: query.offset }, total: count[0]!.n };
  });

  registerRoute(app, routes.queueGet, async ({ params, query }) => {
    await ctx.totals.settle();
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
    // From the queue's totals (a count of 50,000 partitions read them all); counted here only before its first recount.
    const { rows: count } = await ctx.db.query<{ n: number }>(
      `select coalesce((select t.partitions from queen.queue_totals t where t.queue_id = $1),
                       (select count(*)::int from queen.partitions where queue_id = $1)) as n`,
      [queue.id],
    );
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
