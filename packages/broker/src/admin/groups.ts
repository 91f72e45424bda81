import type { FastifyInstance } from 'fastify';
import { QueenError, routes } from '@queen-mq/protocol';
import type { BrokerContext } from '../context/context.js';
import { registerRoute } from '../http/http.js';

export function groupRoutes(app: FastifyInstance, ctx: BrokerContext): void {
  registerRoute(app, routes.groupGet, async ({ params, query }) => {
    // Every partition by default (as in v1); ?limit=&offset= (extension) pages
    // a group that reads tens of thousands of partitions. The oldest pending
    // message is probed only where a partition lags. A group the queue
    // conflates (conflatedGroups) receives one message of a partition that
    // lags, its newest: its lag there is 1, its time lag that message's age.
    const { rows: partitions } = await ctx.db.query(
      `select p.queue_name as queue, p.name as partition, p.id as "partitionId", c.cursor_offset::text as cursor,
              p.first_offset::text as "firstOffset", p.head_offset::text as "headOffset",
              case when v.conflated then least(greatest(p.head_offset - greatest(c.cursor_offset, p.first_offset - 1), 0), 1)
                   else greatest(p.head_offset - greatest(c.cursor_offset, p.first_offset - 1), 0) end::int as lag,
              coalesce(extract(epoch from now() - h.created_at), 0)::float8 as "timeLag",
              (c.lease_id is not null and c.lease_expires_at > now()) as leased,
              case when c.lease_expires_at > now() then queen.iso(c.lease_expires_at) end as "leaseExpiresAt",
              queen.iso(c.last_consumed_at) as "lastConsumedAt"
         from queen.cursors c join queen.partitions p on p.id = c.partition_id
         cross join lateral (select coalesce((select q.options->'conflatedGroups' ? c.consumer_group from queen.queues q where q.id = p.queue_id), false) as conflated) v
         -- timeLag (extension): age in seconds of the oldest message not yet acked (of the newest, which
         -- is what it receives, for a conflated group), 0 when caught up.
         left join lateral (
           select case when v.conflated
                       then (select m.created_at from queen.messages m
                              where m.partition_id = p.id and m.msg_offset > greatest(c.cursor_offset, p.first_offset - 1)
                              order by m.msg_offset desc limit 1)
                       else (select m.created_at from queen.messages m
                              where m.partition_id = p.id and m.msg_offset > greatest(c.cursor_offset, p.first_offset - 1)
                              order by m.msg_offset limit 1) end as created_at
            where p.head_offset > greatest(c.cursor_offset, p.first_offset - 1)) h on true
        where c.consumer_group collate "C" = $1 and ($2::text is null or p.queue_name = $2)
        order by p.queue_name, p.name limit $3 offset $4`,
      [params.group, query.queue ?? null, query.limit ?? null, query.offset],
    );
    const { rows: subscriptions } = await ctx.db.query(
      `select q.name as queue, s.mode, queen.iso(s.start_at) as timestamp
         from queen.subscriptions s join queen.queues q on q.id = s.queue_id
        where s.consumer_group = $1 and ($2::text is null or q.name = $2) order by q.name`,
      [params.group, query.queue ?? null],
    );
    if (partitions.length === 0 && (query.offset === 0 || !(await groupExists(ctx, params.group)))) {
      throw new QueenError('CONSUMER_GROUP_NOT_FOUND', `Consumer group ${params.group} not found`);
    }
    return { name: params.group, partitions, subscriptions };
  });
}

/** Whether `group` has a cursor anywhere (a page past its last partition is empty, not unknown). */
async function groupExists(ctx: BrokerContext, group: string): Promise<boolean> {
  const { rows } = await ctx.db.query<{ e: boolean }>('select exists (select 1 from queen.cursors where consumer_group collate "C" = $1) as e', [group]);
  return rows[0]!.e;
}
