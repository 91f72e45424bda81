import type { FastifyInstance } from 'fastify';
import { adminRoutes } from '@queen-mq/protocol';
import type { BrokerContext } from './context.js';
import { registerRoute } from './http.js';
import { NAME_MATCHES } from './listing-search.js';

/** A group is Dead when it has lag and acked nothing for this long (PROTOCOL §5.9). */
const DEAD_AFTER_S = 3600;
/** A group is Lagging when its oldest pending message is at least this old. */
const LAGGING_AT_S = 60;

interface GroupRow {
  name: string;
  queues: { queue: string; lag: number; maxTimeLag: number }[];
  members: number;
  total_lag: string;
  partitions_with_lag: number;
  max_time_lag: number;
  idle_s: number | null;
}

/**
 * One page of groups rolled up ($1 limit, $2 offset, $3 search text or null).
 * Per (group, partition): lag = head − max(cursor, first − 1) (retained
 * messages not yet acked) and time lag = age of the oldest pending message;
 * then rolled up per queue and per group.
 *
 * The page's names come first (bytewise order, the search applied), walked
 * through cursors_consumer_group one distinct name at a time (a skip scan:
 * one index probe per group, never a pass over every cursor row); then only
 * the page's cursors are rolled up, with an index probe for the oldest
 * pending message only where a partition lags. A page costs the cursors of
 * its groups: a group that reads 50,000 partitions costs those 50,000 rows
 * (and a probe per lagging one) whatever the page size.
 */
export const LIST_GROUPS_SQL = `with recursive names(grp) as (
       (select c.consumer_group collate "C" from queen.cursors c order by 1 limit 1)
       union all
       select (select c.consumer_group collate "C" from queen.cursors c where c.consumer_group collate "C" > n.grp order by 1 limit 1)
         from names n where n.grp is not null
     ), page as (
       select grp from names where grp is not null and ${NAME_MATCHES('grp', '$3')} order by grp limit $1 offset $2
     ), cur as (
       select c.consumer_group as grp, p.queue_name as queue, p.id as partition_id, c.lease_id, c.lease_expires_at,
              greatest(c.cursor_offset, p.first_offset - 1) as floor,
              greatest(p.head_offset - greatest(c.cursor_offset, p.first_offset - 1), 0) as lag,
              coalesce(c.last_acked_at, c.created_at) as last_ack
         from queen.cursors c join queen.partitions p on p.id = c.partition_id
        where c.consumer_group collate "C" in (select grp from page)
     ), per as (
       select grp, queue, lag,
              case when lag > 0 then coalesce(floor(extract(epoch from now() - (
                select m.created_at from queen.messages m
                 where m.partition_id = cur.partition_id and m.msg_offset > cur.floor
                 order by m.msg_offset limit 1))), 0)::bigint else 0 end as time_lag,
              case when lease_id is not null and lease_expires_at > now() then lease_id end as live_lease,
              last_ack
         from cur
     ), per_queue as (
       select grp, json_agg(json_build_object('queue', queue, 'lag', lag, 'maxTimeLag', time_lag) order by queue) as queues
         from (select grp, queue, sum(lag)::bigint as lag, max(time_lag)::bigint as time_lag from per group by grp, queue) q
        group by grp
     )
     select g.grp as name, pq.queues, g.members, g.total_lag::text as total_lag, g.partitions_with_lag, g.max_time_lag, g.idle_s
       from (select grp, count(distinct live_lease)::int as members, sum(lag) as total_lag,
                    count(*) filter (where lag > 0)::int as partitions_with_lag, max(time_lag)::int as max_time_lag,
                    floor(extract(epoch from now() - max(last_ack)))::int as idle_s
               from per group by grp) g
       join per_queue pq on pq.grp = g.grp
      order by g.grp collate "C"`;

/** A page of groups with their lag and state (PROTOCOL §5.9). */
async function listGroups(ctx: BrokerContext, page: { limit: number; offset: number; search?: string }) {
  const { rows } = await ctx.db.query<GroupRow>(
    LIST_GROUPS_SQL,
    [page.limit, page.offset, page.search || null],
  );
  return rows.map((r) => {
    const totalLag = Number(r.total_lag);
    const state = totalLag > 0 && (r.idle_s ?? 0) >= DEAD_AFTER_S ? 'Dead' : r.max_time_lag >= LAGGING_AT_S ? 'Lagging' : 'Stable';
    return {
      name: r.name,
      topics: r.queues.map((q) => q.queue),
      queues: r.queues.map((q) => ({ queue: q.queue, lag: Number(q.lag), maxTimeLag: Number(q.maxTimeLag) })),
      members: r.members,
      totalLag,
      partitionsWithLag: r.partitions_with_lag,
      maxTimeLag: r.max_time_lag,
      state,
    };
  });
}

/**
 * Group delete (PROTOCOL §5.9): cursors, leases and failure records go, on
 * every queue or on the one named; subscriptions too with deleteMetadata
 * (default true, as in the v1 API). DLQ entries stay. Idempotent: an unknown
 * group or queue deletes nothing.
 */
async function deleteGroup(ctx: BrokerContext, group: string, queue: string | null, deleteMetadata: boolean) {
  let deleted = 0;
  if (queue === null) {
    const { rows } = await ctx.db.query<{ n: number }>('select queen.log_delete_group_v1($1, null, $2) as n', [group, deleteMetadata]);
    deleted = rows[0]!.n;
  } else {
    const { rows } = await ctx.db.query<{ n: number | null }>(
      'select queen.log_delete_group_v1($1, q.id, $3) as n from queen.queues q where q.name = $2',
      [group, queue, deleteMetadata],
    );
    deleted = rows[0]?.n ?? 0;
  }
  return { success: true as const, consumerGroup: group, deletedPartitions: deleted, metadataDeleted: deleteMetadata };
}

export function consumerGroupRoutes(app: FastifyInstance, ctx: BrokerContext): void {
  registerRoute(app, adminRoutes.groupList, async ({ query }) => listGroups(ctx, query));
  registerRoute(app, adminRoutes.groupDelete, async ({ params, query }) => deleteGroup(ctx, params.group, null, query.deleteMetadata ?? true));
  registerRoute(app, adminRoutes.groupQueueDelete, async ({ params, query }) =>
    deleteGroup(ctx, params.group, params.queue, query.deleteMetadata ?? true),
  );
}
