import type { FastifyInstance } from 'fastify';
import { adminRoutes } from '@queen-mq/protocol';
import type { BrokerContext } from '../context/context.js';
import { registerRoute } from '../http/http.js';
import { DELETE_GROUP_OF_QUEUE_SQL, DELETE_GROUP_SQL, type DeleteGroupRow } from '../sql/queen.log_delete_group_v1.js';
import { NAME_MATCHES } from './listing-search.js';

/** A group is Dead when it has lag and acked nothing for this long (PROTOCOL §5.9). */
const DEAD_AFTER_S = 3600;
/** A group is Lagging when its oldest pending message is at least this old. */
const LAGGING_AT_S = 60;

interface GroupRow {
  name: string;
  queues: { queue: string; lag: number; maxTimeLag: number; members: number; idleS: number | null }[];
  members: number;
  total_lag: string;
  partitions_with_lag: number;
  max_time_lag: number;
  idle_s: number | null;
}

/**
 * One page of groups rolled up ($1 limit, $2 offset, $3 search text or null)
 * from their listing totals (listing-totals.ts): lag (retained messages not
 * yet acked), partitions with lag and the oldest pending message per
 * (queue, group), kept current as writes happen; time lag is that message's
 * age now.
 *
 * The page's names come first (bytewise order, the search applied), walked
 * through group_totals_group one distinct name at a time (a skip scan: one
 * index probe per group); then the page's (queue, group) rows. A page costs
 * one row per queue its groups read, never their partitions or cursors.
 * Members are the live leases of the page's groups, read through the index
 * of leased cursors (cursors_lease_id): what consumers hold now, not the
 * size of the queues; per queue too, with each queue's own lag, time lag and
 * last ack, so a (group, queue) row describes that queue alone.
 */
export const LIST_GROUPS_SQL = `with recursive names(grp) as (
       (select g.consumer_group collate "C" from queen.group_totals g order by 1 limit 1)
       union all
       select (select g.consumer_group collate "C" from queen.group_totals g where g.consumer_group collate "C" > n.grp order by 1 limit 1)
         from names n where n.grp is not null
     ), page as (
       select grp from names where grp is not null and ${NAME_MATCHES('grp', '$3')} order by grp limit $1 offset $2
     ), per_queue as (
       -- A group its queue conflates (conflatedGroups) receives one message
       -- per partition that lags: its lag is those partitions.
       select g.consumer_group collate "C" as grp, g.queue_name as queue,
              case when coalesce((select q.options->'conflatedGroups' ? g.consumer_group from queen.queues q where q.id = g.queue_id), false)
                   then g.partitions_with_lag else g.lag end as lag,
              g.partitions_with_lag,
              coalesce(floor(extract(epoch from now() - g.oldest_pending_at)), 0)::bigint as time_lag, g.last_acked_at
         from queen.group_totals g
        where g.consumer_group collate "C" in (select grp from page)
     ), live as (
       select c.consumer_group collate "C" as grp, c.lease_id, c.partition_id
         from (select c.consumer_group, c.lease_id, c.lease_expires_at, c.partition_id from queen.cursors c where c.lease_id is not null offset 0) c
        where c.lease_expires_at > now() and c.consumer_group collate "C" in (select grp from page)
     ), leases as (
       select grp, count(distinct lease_id)::int as members from live group by 1
     ), queue_leases as (
       select l.grp, p.queue_name as queue, count(distinct l.lease_id)::int as members
         from live l join queen.partitions p on p.id = l.partition_id
        group by 1, 2
     )
     select g.grp as name, g.queues, coalesce(l.members, 0) as members, g.total_lag::text as total_lag, g.partitions_with_lag,
            g.max_time_lag, g.idle_s
       from (select q.grp, json_agg(json_build_object('queue', q.queue, 'lag', q.lag, 'maxTimeLag', q.time_lag, 'members', coalesce(ql.members, 0),
                                                      'idleS', floor(extract(epoch from now() - q.last_acked_at))::int) order by q.queue) as queues,
                    sum(q.lag) as total_lag, sum(q.partitions_with_lag)::int as partitions_with_lag, max(q.time_lag)::int as max_time_lag,
                    floor(extract(epoch from now() - max(q.last_acked_at)))::int as idle_s
               from per_queue q left join queue_leases ql on ql.grp = q.grp and ql.queue = q.queue
              group by q.grp) g
       left join leases l on l.grp = g.grp
      order by g.grp`;

/**
 * Stable, Lagging or Dead, from lag (messages), time lag (s) and seconds
 * since the last ack: of a whole group, or of one of its queues alone.
 */
function stateOf(lag: number, timeLag: number, idleS: number | null): 'Stable' | 'Lagging' | 'Dead' {
  return lag > 0 && (idleS ?? 0) >= DEAD_AFTER_S ? 'Dead' : timeLag >= LAGGING_AT_S ? 'Lagging' : 'Stable';
}

/** A page of groups with their lag and state (PROTOCOL §5.9), and each of their queues' own. */
async function listGroups(ctx: BrokerContext, page: { limit: number; offset: number; search?: string }) {
  await ctx.totals.settle();
  const { rows } = await ctx.db.query<GroupRow>(
    LIST_GROUPS_SQL,
    [page.limit, page.offset, page.search || null],
  );
  return rows.map((r) => {
    const totalLag = Number(r.total_lag);
    return {
      name: r.name,
      topics: r.queues.map((q) => q.queue),
      queues: r.queues.map((q) => ({
        queue: q.queue,
        lag: Number(q.lag),
        maxTimeLag: Number(q.maxTimeLag),
        members: q.members,
        state: stateOf(Number(q.lag), Number(q.maxTimeLag), q.idleS),
      })),
      members: r.members,
      totalLag,
      partitionsWithLag: r.partitions_with_lag,
      maxTimeLag: r.max_time_lag,
      state: stateOf(totalLag, r.max_time_lag, r.idle_s),
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
  // The partitions whose cursors of the group are counted in the listing
  // totals: recounted after the delete, they take the group's shares out.
  const { rows: counted } = await ctx.db.query<{ id: string }>(
    `select ct.partition_id as id
       from queen.group_totals g join queen.cursor_tallies ct on ct.queue_id = g.queue_id and ct.consumer_group = g.consumer_group
      where g.consumer_group collate "C" = $1 and ($2::text is null or g.queue_name = $2)`,
    [group, queue],
  );
  let deleted = 0;
  if (queue === null) {
    const { rows } = await ctx.db.query<DeleteGroupRow>(DELETE_GROUP_SQL, [group, deleteMetadata]);
    deleted = rows[0]!.n;
  } else {
    const { rows } = await ctx.db.query<DeleteGroupRow>(DELETE_GROUP_OF_QUEUE_SQL, [group, queue, deleteMetadata]);
    deleted = rows[0]?.n ?? 0;
  }
  ctx.totals.touch(counted.map((r) => r.id));
  ctx.totals.groupDeleted(group, queue);
  return { success: true as const, consumerGroup: group, deletedPartitions: deleted, metadataDeleted: deleteMetadata };
}

export function consumerGroupRoutes(app: FastifyInstance, ctx: BrokerContext): void {
  registerRoute(app, adminRoutes.groupList, async ({ query }) => listGroups(ctx, query));
  registerRoute(app, adminRoutes.groupDelete, async ({ params, query }) => deleteGroup(ctx, params.group, null, query.deleteMetadata ?? true));
  registerRoute(app, adminRoutes.groupQueueDelete, async ({ params, query }) =>
    deleteGroup(ctx, params.group, params.queue, query.deleteMetadata ?? true),
  );
}
