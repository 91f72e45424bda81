-- A pop answers the traceparent of every message it claimed (issue 16's
-- tracing, found flaky by its tests). The pop statement read the column
-- beside the rows queen.log_pop_v3 returned, in the statement's own
-- snapshot; log_pop_v3, a volatile function, finds its messages in fresh
-- snapshots. A message committed between the two was claimed and delivered
-- with traceparent null, so its consumer's span lost its parent. Read here,
-- in a volatile function, the column is read in a snapshot taken after the
-- claim, which sees every message the claim saw.
create function queen.message_traceparent_v1(p_partition_id uuid, p_offset bigint) returns text
language sql volatile as $$
  select m.traceparent from queen.messages m where m.partition_id = p_partition_id and m.msg_offset = p_offset
$$;
