-- Retention (PROTOCOL §3.9) of ONE partition, at most p_max_segments whole
-- segments, in the caller's (short) transaction: the partition row is locked
-- (rank 4) only while those few segments go, so pushes to it wait at most
-- that long and pushes elsewhere never. The broker calls it for each
-- partition log_retention_candidates_v1 names until `more` is false. A
-- segment goes when its newest message is older than the queue's
-- retentionSeconds (retention enabled), or than completedRetentionSeconds
-- and consumed by every reader (log_consumed_upto_v1), or than
-- maxWaitTimeSeconds.
create or replace function queen.log_retention_partition_v1(p_partition_id uuid, p_max_segments int) returns jsonb
language plpgsql as $$
declare
  v_part   record;
  v_bound  bigint;
  v_cap    bigint;
  v_upto   bigint;
  v_segs   bigint;
  v_msgs   bigint;
begin
  select p.id,
         coalesce((q.options->>'retentionEnabled')::boolean, false) as enabled,
         coalesce((q.options->>'retentionSeconds')::bigint, 0) as ret_s,
         coalesce((q.options->>'completedRetentionSeconds')::bigint, 0) as done_s,
         coalesce((q.options->>'maxWaitTimeSeconds')::bigint, 0) as wait_s
    into v_part
    from queen.partitions p join queen.queues q on q.id = p.queue_id
   where p.id = p_partition_id
     for update of p;
  if not found then return jsonb_build_object('segmentsDropped', 0, 'messagesDropped', 0, 'more', false); end if;

  if v_part.enabled and v_part.done_s > 0 then v_upto := queen.log_consumed_upto_v1(p_partition_id); end if;
  select max(s.last_offset) into v_bound
    from queen.log_segments s
   where s.partition_id = p_partition_id
     and ((v_part.enabled and v_part.ret_s > 0 and s.last_created_at < now() - make_interval(secs => v_part.ret_s))
       or (v_part.enabled and v_part.done_s > 0 and s.last_created_at < now() - make_interval(secs => v_part.done_s)
           and s.last_offset <= v_upto)
       or (v_part.wait_s > 0 and s.last_created_at < now() - make_interval(secs => v_part.wait_s)));
  if v_bound is null then return jsonb_build_object('segmentsDropped', 0, 'messagesDropped', 0, 'more', false); end if;
  -- At most p_max_segments segments this call.
  select max(s.last_offset) into v_cap from (
    select s.last_offset from queen.log_segments s
     where s.partition_id = p_partition_id and s.first_offset <= v_bound
     order by s.first_offset limit p_max_segments) s;
  v_cap := least(v_bound, coalesce(v_cap, v_bound));

  delete from queen.messages m where m.partition_id = p_partition_id and m.msg_offset <= v_cap;
  get diagnostics v_msgs = row_count;
  delete from queen.log_segments s where s.partition_id = p_partition_id and s.first_offset <= v_cap;
  get diagnostics v_segs = row_count;
  -- DLQ entries and failure records live as long as their message.
  delete from queen.dlq d where d.partition_id = p_partition_id and d.msg_offset <= v_cap;
  delete from queen.failures f where f.partition_id = p_partition_id and f.msg_offset <= v_cap;
  update queen.partitions p
     set first_offset = greatest(p.first_offset, v_cap + 1),
         segment_first = case when p.segment_first <= v_cap then null else p.segment_first end,
         segment_started_at = case when p.segment_first <= v_cap then null else p.segment_started_at end,
         -- The oldest segment left (migration 030); none: the partition is empty.
         retained_since = (select s.first_created_at from queen.log_segments s
                            where s.partition_id = p_partition_id order by s.first_offset limit 1)
   where p.id = p_partition_id;
  return jsonb_build_object('segmentsDropped', v_segs, 'messagesDropped', v_msgs, 'more', v_cap < v_bound);
end
$$;
