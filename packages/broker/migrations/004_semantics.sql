-- Broker semantics beyond push/pop/ack: seek, group delete, retention,
-- partition cleanup and the cursor locking of transactions (queue delete is
-- in 005, because it removes pending timers too).
-- Lock order (PROTOCOL §4): partition rows (rank 4) ascending id before
-- cursor rows (rank 5) ascending (partition id, group).

-- Consumer group delete (PROTOCOL §5.9): cursors (with their leases) and
-- failure records of the group, on every queue or on one; subscriptions too
-- when asked. DLQ entries stay. Answers the number of cursor rows removed.
create or replace function queen.log_delete_group_v1(p_group text, p_queue_id uuid, p_delete_metadata boolean) returns int
language plpgsql as $$
declare
  v_n int;
begin
  perform 1 from queen.cursors c
   where c.consumer_group = p_group
     and (p_queue_id is null or c.partition_id in (select p.id from queen.partitions p where p.queue_id = p_queue_id))
   order by c.partition_id, c.consumer_group for update;
  delete from queen.cursors c
   where c.consumer_group = p_group
     and (p_queue_id is null or c.partition_id in (select p.id from queen.partitions p where p.queue_id = p_queue_id));
  get diagnostics v_n = row_count;
  delete from queen.failures f
   where f.consumer_group = p_group
     and (p_queue_id is null or f.partition_id in (select p.id from queen.partitions p where p.queue_id = p_queue_id));
  if p_delete_metadata then
    delete from queen.subscriptions s where s.consumer_group = p_group and (p_queue_id is null or s.queue_id = p_queue_id);
  end if;
  return v_n;
end
$$;

-- Where a timestamp seek lands: the greatest retained offset created at or
-- before p_ts, 0 when none.
create or replace function queen.log_offset_at_v1(p_partition_id uuid, p_ts timestamptz) returns bigint
language sql stable as $$
  select coalesce(max(m.msg_offset), 0) from queen.messages m where m.partition_id = p_partition_id and m.created_at <= p_ts
$$;

-- Seek (PROTOCOL §5.9). Moves the cursor of (partition, group) anywhere,
-- backwards included, ends the lease and clears failure records. Cursor rows
-- are created first (committed with the seek), then locked ascending.
-- p_partition_id null = every partition of p_queue_id. Target: p_offset
-- (clamped to the head), else p_ts, else the head. Answers
-- [{partition_id, cursor}] of the rows moved.
create or replace function queen.log_seek_v1(
  p_group text, p_queue_id uuid, p_partition_id uuid, p_offset bigint, p_ts timestamptz
) returns table (partition_id uuid, cursor_offset bigint)
language plpgsql as $$
#variable_conflict use_column
begin
  insert into queen.cursors (partition_id, consumer_group, cursor_offset)
  select p.id, p_group, 0 from queen.partitions p
   where p.queue_id = p_queue_id and (p_partition_id is null or p.id = p_partition_id)
   order by p.id
  on conflict do nothing;

  perform 1 from queen.cursors c join queen.partitions p on p.id = c.partition_id
   where p.queue_id = p_queue_id and (p_partition_id is null or p.id = p_partition_id) and c.consumer_group = p_group
   order by c.partition_id for update of c;

  delete from queen.failures f using queen.partitions p
   where f.partition_id = p.id and p.queue_id = p_queue_id and (p_partition_id is null or p.id = p_partition_id)
     and f.consumer_group = p_group;

  return query
  update queen.cursors c
     set cursor_offset = case
           when p_offset is not null then least(p_offset, p.head_offset)
           when p_ts is not null then queen.log_offset_at_v1(p.id, p_ts)
           else p.head_offset end,
         lease_id = null, lease_expires_at = null, lease_last_offset = null
    from queen.partitions p
   where p.id = c.partition_id and p.queue_id = p_queue_id and (p_partition_id is null or p.id = p_partition_id)
     and c.consumer_group = p_group
  returning c.partition_id, c.cursor_offset;
end
$$;

-- Transaction acks (PROTOCOL §5.7): the cursor rows of every (partition, group)
-- an ack names, locked ascending before any ack applies (rank 5, after the
-- pushes' append locks). Missing rows of existing partitions are created by
-- the broker in a short transaction before; rows of partitions first written
-- by this transaction's pushes are created here, under our own append lock.
-- targets: [{partitionId, consumerGroup}]
create or replace function queen.log_lock_cursors_v1(p_targets jsonb) returns void
language plpgsql as $$
begin
  insert into queen.cursors (partition_id, consumer_group, cursor_offset)
  select t.pid, t.grp, queen.log_cursor_start_v1(t.pid, t.grp)
    from (select distinct (e->>'partitionId')::uuid as pid, e->>'consumerGroup' as grp from jsonb_array_elements(p_targets) e) t
    join queen.partitions p on p.id = t.pid
   order by t.pid, t.grp
  on conflict do nothing;
  perform 1 from queen.cursors c
   where (c.partition_id, c.consumer_group) in
         (select (e->>'partitionId')::uuid, e->>'consumerGroup' from jsonb_array_elements(p_targets) e)
   order by c.partition_id, c.consumer_group for update;
end
$$;

-- Retention (PROTOCOL §3.9), whole segments only. Each rule selects a prefix
-- of a partition's segments (createdAt and cursors only grow with offset), so
-- the union is the prefix up to the highest qualifying segment. Partition rows
-- are locked ascending (rank 4) before anything is dropped, so a push cannot
-- extend a segment while it is judged.
create or replace function queen.log_retention_v1() returns jsonb
language plpgsql as $$
declare
  v_part   record;
  v_bound  bigint;
  v_n      bigint;
  v_segs   bigint := 0;
  v_msgs   bigint := 0;
  v_first  bigint;
begin
  for v_part in
    select p.id,
           coalesce((q.options->>'retentionEnabled')::boolean, false) as enabled,
           coalesce((q.options->>'retentionSeconds')::bigint, 0) as ret_s,
           coalesce((q.options->>'completedRetentionSeconds')::bigint, 0) as done_s,
           coalesce((q.options->>'maxWaitTimeSeconds')::bigint, 0) as wait_s
      from queen.partitions p join queen.queues q on q.id = p.queue_id
     where ((coalesce((q.options->>'retentionEnabled')::boolean, false)
             and (coalesce((q.options->>'retentionSeconds')::bigint, 0) > 0
                  or coalesce((q.options->>'completedRetentionSeconds')::bigint, 0) > 0))
            or coalesce((q.options->>'maxWaitTimeSeconds')::bigint, 0) > 0)
       and p.head_offset >= p.first_offset
     order by p.id
  loop
    perform 1 from queen.partitions p where p.id = v_part.id for update;
    continue when not found;

    select max(s.last_offset) into v_bound
      from queen.log_segments s
     where s.partition_id = v_part.id
       and ((v_part.enabled and v_part.ret_s > 0 and s.last_created_at < now() - make_interval(secs => v_part.ret_s))
         or (v_part.enabled and v_part.done_s > 0 and s.last_created_at < now() - make_interval(secs => v_part.done_s)
             and s.last_offset <= (select min(c.cursor_offset) from queen.cursors c where c.partition_id = v_part.id))
         or (v_part.wait_s > 0 and s.last_created_at < now() - make_interval(secs => v_part.wait_s)));
    continue when v_bound is null;

    delete from queen.messages m where m.partition_id = v_part.id and m.msg_offset <= v_bound;
    get diagnostics v_n = row_count;
    v_msgs := v_msgs + v_n;
    delete from queen.log_segments s where s.partition_id = v_part.id and s.first_offset <= v_bound;
    get diagnostics v_n = row_count;
    v_segs := v_segs + v_n;
    -- DLQ entries and failure records live as long as their message.
    delete from queen.dlq d where d.partition_id = v_part.id and d.msg_offset <= v_bound;
    delete from queen.failures f where f.partition_id = v_part.id and f.msg_offset <= v_bound;

    update queen.partitions p
       set first_offset = greatest(p.first_offset, v_bound + 1),
           segment_first = case when p.segment_first <= v_bound then null else p.segment_first end,
           segment_started_at = case when p.segment_first <= v_bound then null else p.segment_started_at end
     where p.id = v_part.id;
  end loop;
  return jsonb_build_object('segmentsDropped', v_segs, 'messagesDropped', v_msgs);
end
$$;

-- Partition cleanup (PROTOCOL §3.9): a partition with no retained message
-- and no push for p_inactive_s seconds is deleted with its cursors, unless a
-- stream state row references it or a lease on it is live (vetoed). Lock
-- order (§4): every candidate partition row ascending first (re-checked under
-- the lock: a push may have landed meanwhile), then their cursor rows.
create or replace function queen.log_partition_cleanup_v1(p_inactive_s bigint) returns jsonb
language plpgsql as $$
declare
  v_state    boolean := to_regclass('queen_streams.state') is not null;
  v_cands    uuid[];
  v_doomed   uuid[] := '{}';
  v_id       uuid;
  v_ref      boolean;
  v_vetoed   int := 0;
  v_queues   text[];
begin
  select coalesce(array_agg(s.id), '{}') into v_cands from (
    select p.id from queen.partitions p
     where p.head_offset < p.first_offset and p.last_activity < now() - make_interval(secs => p_inactive_s)
     order by p.id for update) s;
  select coalesce(array_agg(p.id order by p.id), '{}') into v_cands from queen.partitions p
   where p.id = any(v_cands)
     and p.head_offset < p.first_offset and p.last_activity < now() - make_interval(secs => p_inactive_s);

  foreach v_id in array v_cands loop
    v_ref := exists (select 1 from queen.cursors c where c.partition_id = v_id and c.lease_id is not null and c.lease_expires_at > now());
    if not v_ref and v_state then
      execute 'select exists (select 1 from queen_streams.state where partition_id = $1)' into v_ref using v_id;
    end if;
    if v_ref then
      v_vetoed := v_vetoed + 1;
    else
      v_doomed := v_doomed || v_id;
    end if;
  end loop;

  perform 1 from queen.cursors c where c.partition_id = any(v_doomed)
   order by c.partition_id, c.consumer_group for update;
  select coalesce(array_agg(distinct p.queue_name), '{}') into v_queues from queen.partitions p where p.id = any(v_doomed);
  delete from queen.messages m where m.partition_id = any(v_doomed);
  delete from queen.log_segments s where s.partition_id = any(v_doomed);
  delete from queen.failures f where f.partition_id = any(v_doomed);
  delete from queen.dlq d where d.partition_id = any(v_doomed);
  delete from queen.cursors c where c.partition_id = any(v_doomed);
  delete from queen.partitions p where p.id = any(v_doomed);
  return jsonb_build_object('deleted', cardinality(v_doomed), 'vetoed', v_vetoed, 'queues', to_jsonb(v_queues));
end
$$;
