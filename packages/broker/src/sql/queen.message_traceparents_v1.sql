-- A pop answers the traceparent of every message it claimed (issue 16's
-- tracing, found flaky by its tests). The pop statement read the column
-- beside the rows queen.log_pop_v4 returned, in the statement's own
-- snapshot; log_pop_v4, a volatile function, finds its messages in fresh
-- snapshots. A message committed between the two was claimed and delivered
-- with traceparent null, so its consumer's span lost its parent. Read by
-- this volatile function, once per pop for all its traced messages, the
-- column is read in a snapshot taken after the claim, which sees every
-- message the claim saw. One primary-key lookup per message.
create or replace function queen.message_traceparents_v1(p_partition_ids uuid[], p_offsets bigint[])
returns table (partition_id uuid, msg_offset bigint, traceparent text)
language sql volatile set enable_seqscan = off as $$
  select k.partition_id, k.msg_offset, m.traceparent
    from unnest(p_partition_ids, p_offsets) as k(partition_id, msg_offset)
    cross join lateral (select m.traceparent from queen.messages m
                         where m.partition_id = k.partition_id and m.msg_offset = k.msg_offset limit 1) m
$$;
