-- Recounts the listing totals (migration 029) for the partitions a broker
-- wrote to: each partition's share of its queue's totals and each of its
-- cursors' share of its (queue, group) totals are computed again, and the
-- totals move by the difference from what was counted before. The work
-- follows the partitions named, never the size of their queues: a queue of
-- 50,000 partitions of which one was written costs one partition's recount.
--
-- p_partitions: partitions written since the last recount (an id no longer
-- in queen.partitions takes its share out). p_queues: queues recounted
-- whole (every share dropped and counted again): after a change the broker
-- cannot name by partition, and, on their own, the queues of p_partitions
-- that have no totals yet (created before migration 029, or by SQL).
--
-- One recount at a time across brokers (a transaction-level advisory lock):
-- the shares read are the ones the previous recount wrote, and every
-- statement after the lock reads data at least as new as the last recount's.
-- Answers the partitions of p_partitions on which some cursor still holds a
-- live lease: the ack that ends it may come from outside the broker's routes
-- (@queen-mq/pg's ack), so the caller recounts them again later.
-- enable_seqscan = off, as for the hot functions (issue 31): a plan cached
-- while the tables were small would read them whole once they are not.
create or replace function queen.listing_totals_refresh_v1(p_partitions uuid[], p_queues text[])
returns setof uuid
language plpgsql set enable_seqscan = off as $$
declare
  v_at       timestamptz;
  v_whole    uuid[];
  v_parts    uuid[];
  v_leased   uuid[];
  -- Per queue: the difference of the partitions' shares.
  d_queue    uuid[];
  d_parts    int[];
  d_depth    bigint[];
  d_retained bigint[];
  d_pushed   bigint[];
  d_dlq      bigint[];
  d_activity timestamptz[];
  -- Per (queue, group): the difference of the cursors' shares.
  g_queue    uuid[];
  g_group    text[];
  g_cursors  int[];
  g_lag      bigint[];
  g_retained bigint[];
  g_lagging  int[];
begin
  perform pg_advisory_xact_lock(7163265029);
  v_at := clock_timestamp();

  select coalesce(array_agg(w.id), '{}') into v_whole from (
    select q.id from queen.queues q where q.name = any(p_queues)
    union
    select p.queue_id from queen.partitions p
     where p.id = any(p_partitions) and not exists (select 1 from queen.queue_totals t where t.queue_id = p.queue_id)) w;
  if cardinality(v_whole) > 0 then
    delete from queen.partition_tallies t where t.queue_id = any(v_whole);
    delete from queen.cursor_tallies t where t.queue_id = any(v_whole);
    delete from queen.group_totals t where t.queue_id = any(v_whole);
    insert into queen.queue_totals as t (queue_id, queue_name, refreshed_at)
    select q.id, q.name, v_at from queen.queues q where q.id = any(v_whole)
    on conflict (queue_id) do update
       set partitions = 0, depth = 0, retained = 0, pushed = 0, dlq = 0, oldest_pending_at = null, last_activity = null, refreshed_at = v_at;
  end if;
  select coalesce(array_agg(distinct x.id), '{}') into v_parts from (
    select unnest(p_partitions) as id
    union all
    select p.id from queen.partitions p where p.queue_id = any(v_whole)) x;

  -- Partitions: depth and the oldest pending message through the queue-mode cursor.
  with cur as (
    select p.id, p.queue_id, p.head_offset as head, p.first_offset as first, p.last_activity,
           greatest(coalesce(c.cursor_offset, 0), p.first_offset - 1) as floor
      from queen.partitions p
      left join queen.cursors c on c.partition_id = p.id and c.consumer_group = '__QUEUE_MODE__'
     where p.id = any(v_parts)
  ), now_ as (
    select cur.id as partition_id, cur.queue_id, greatest(cur.head - cur.floor, 0) as depth,
           greatest(cur.head - cur.first + 1, 0) as retained, cur.head as pushed,
           (select count(*) from queen.dlq d where d.partition_id = cur.id) as dlq,
           case when cur.head > cur.floor then (
             select m.created_at from queen.messages m
              where m.partition_id = cur.id and m.msg_offset > cur.floor order by m.msg_offset limit 1) end as oldest_pending_at,
           cur.last_activity
      from cur
  ), was as (
    select t.* from queen.partition_tallies t where t.partition_id = any(v_parts)
  ), gone as (
    delete from queen.partition_tallies t
     where t.partition_id = any(v_parts) and not exists (select 1 from now_ n where n.partition_id = t.partition_id)
  ), put as (
    insert into queen.partition_tallies as t (partition_id, queue_id, depth, retained, pushed, dlq, oldest_pending_at)
    select n.partition_id, n.queue_id, n.depth, n.retained, n.pushed, n.dlq, n.oldest_pending_at from now_ n
    on conflict (partition_id) do update
       set depth = excluded.depth, retained = excluded.retained, pushed = excluded.pushed, dlq = excluded.dlq,
           oldest_pending_at = excluded.oldest_pending_at
     where (t.depth, t.retained, t.pushed, t.dlq, t.oldest_pending_at)
           is distinct from (excluded.depth, excluded.retained, excluded.pushed, excluded.dlq, excluded.oldest_pending_at)
  ), diff as (
    select coalesce(n.queue_id, w.queue_id) as queue_id,
           (count(n.partition_id) - count(w.partition_id))::int as partitions,
           sum(coalesce(n.depth, 0) - coalesce(w.depth, 0))::bigint as depth,
           sum(coalesce(n.retained, 0) - coalesce(w.retained, 0))::bigint as retained,
           sum(coalesce(n.pushed, 0) - coalesce(w.pushed, 0))::bigint as pushed,
           sum(coalesce(n.dlq, 0) - coalesce(w.dlq, 0))::bigint as dlq,
           max(n.last_activity) as last_activity
      from now_ n full join was w on w.partition_id = n.partition_id
     group by 1
  )
  select array_agg(queue_id), array_agg(partitions), array_agg(depth), array_agg(retained), array_agg(pushed), array_agg(dlq), array_agg(last_activity)
    into d_queue, d_parts, d_depth, d_retained, d_pushed, d_dlq, d_activity
    from diff;

  update queen.queue_totals t
     set partitions = t.partitions + d.partitions, depth = t.depth + d.depth, retained = t.retained + d.retained,
         pushed = t.pushed + d.pushed, dlq = t.dlq + d.dlq,
         last_activity = greatest(t.last_activity, d.last_activity),
         oldest_pending_at = (select min(pt.oldest_pending_at) from queen.partition_tallies pt where pt.queue_id = t.queue_id),
         refreshed_at = v_at
    from unnest(d_queue, d_parts, d_depth, d_retained, d_pushed, d_dlq, d_activity)
         as d(queue_id, partitions, depth, retained, pushed, dlq, last_activity)
   where t.queue_id = d.queue_id;

  -- Cursors of every group on those partitions: lag and the oldest message not yet acked.
  with cur as (
    select c.partition_id, c.consumer_group, p.queue_id,
           greatest(p.head_offset - greatest(c.cursor_offset, p.first_offset - 1), 0) as lag,
           greatest(p.head_offset - p.first_offset + 1, 0) as retained,
           greatest(c.cursor_offset, p.first_offset - 1) as floor,
           coalesce(c.last_acked_at, c.created_at) as last_acked_at,
           c.lease_id is not null and c.lease_expires_at > now() as leased
      from queen.partitions p join queen.cursors c on c.partition_id = p.id
     where p.id = any(v_parts)
  ), now_ as (
    select cur.partition_id, cur.consumer_group, cur.queue_id, cur.lag, cur.retained, cur.last_acked_at, cur.leased,
           case when cur.lag > 0 then (
             select m.created_at from queen.messages m
              where m.partition_id = cur.partition_id and m.msg_offset > cur.floor order by m.msg_offset limit 1) end as oldest_pending_at
      from cur
  ), was as (
    select t.* from queen.cursor_tallies t where t.partition_id = any(v_parts)
  ), gone as (
    delete from queen.cursor_tallies t
     where t.partition_id = any(v_parts)
       and not exists (select 1 from now_ n where n.partition_id = t.partition_id and n.consumer_group = t.consumer_group)
  ), put as (
    insert into queen.cursor_tallies as t (partition_id, consumer_group, queue_id, lag, retained, oldest_pending_at, last_acked_at)
    select n.partition_id, n.consumer_group, n.queue_id, n.lag, n.retained, n.oldest_pending_at, n.last_acked_at from now_ n
    on conflict (partition_id, consumer_group) do update
       set lag = excluded.lag, retained = excluded.retained, oldest_pending_at = excluded.oldest_pending_at, last_acked_at = excluded.last_acked_at
     where (t.lag, t.retained, t.oldest_pending_at, t.last_acked_at)
           is distinct from (excluded.lag, excluded.retained, excluded.oldest_pending_at, excluded.last_acked_at)
  ), diff as (
    select coalesce(n.queue_id, w.queue_id) as queue_id, coalesce(n.consumer_group, w.consumer_group) as consumer_group,
           (count(n.partition_id) - count(w.partition_id))::int as cursors,
           sum(coalesce(n.lag, 0) - coalesce(w.lag, 0))::bigint as lag,
           sum(coalesce(n.retained, 0) - coalesce(w.retained, 0))::bigint as retained,
           (count(*) filter (where n.lag > 0) - count(*) filter (where w.lag > 0))::int as lagging
      from now_ n full join was w on w.partition_id = n.partition_id and w.consumer_group = n.consumer_group
     group by 1, 2
  )
  select array_agg(queue_id), array_agg(consumer_group), array_agg(cursors), array_agg(lag), array_agg(retained), array_agg(lagging),
         (select coalesce(array_agg(distinct n.partition_id), '{}') from now_ n where n.leased)
    into g_queue, g_group, g_cursors, g_lag, g_retained, g_lagging, v_leased
    from diff;

  insert into queen.group_totals as t (queue_id, consumer_group, queue_name, cursors, lag, retained, partitions_with_lag, oldest_pending_at, last_acked_at, refreshed_at)
  select d.queue_id, d.consumer_group, q.name, d.cursors, d.lag, d.retained, d.lagging,
         (select min(ct.oldest_pending_at) from queen.cursor_tallies ct where ct.queue_id = d.queue_id and ct.consumer_group = d.consumer_group),
         (select max(ct.last_acked_at) from queen.cursor_tallies ct where ct.queue_id = d.queue_id and ct.consumer_group = d.consumer_group),
         v_at
    from unnest(g_queue, g_group, g_cursors, g_lag, g_retained, g_lagging) as d(queue_id, consumer_group, cursors, lag, retained, lagging)
    join queen.queues q on q.id = d.queue_id
  on conflict (queue_id, consumer_group) do update
     set cursors = t.cursors + excluded.cursors, lag = t.lag + excluded.lag, retained = t.retained + excluded.retained,
         partitions_with_lag = t.partitions_with_lag + excluded.partitions_with_lag,
         oldest_pending_at = excluded.oldest_pending_at,
         last_acked_at = excluded.last_acked_at, refreshed_at = v_at;
  -- A group none of whose cursors is left on a queue leaves that queue's listing.
  delete from queen.group_totals t
   using unnest(g_queue, g_group) as d(queue_id, consumer_group)
   where t.queue_id = d.queue_id and t.consumer_group = d.consumer_group and t.cursors <= 0;

  return query select unnest(v_leased);
end
$$;
