-- A partition's head moved past p_new messages just appended at p_created
-- (the row as read under the append lock, which the caller holds): the
-- segment bookkeeping and the partition row. Split out of
-- queen.log_append_v1, unchanged, so a restatement of the allocator
-- no longer has to carry it.
create or replace function queen.log_append_advance_v1(p_part queen.partitions, p_new bigint, p_created timestamptz) returns void
language plpgsql set enable_seqscan = off as $$
declare
  v_max_msgs    int := queen.setting_int('queen.segment_max_messages', 10000);
  v_max_age     int := queen.setting_int('queen.segment_max_age_s', 3600);
  v_head        bigint := p_part.head_offset + p_new;
  v_from        bigint := p_part.head_offset + 1;
  v_to          bigint;
  v_seg_first   bigint := p_part.segment_first;
  v_seg_started timestamptz := p_part.segment_started_at;
begin
  -- Segment bookkeeping: fill the open segment while it has room and is
  -- young (it may have been dropped by retention: then open a new one), then
  -- open segments of at most v_max_msgs for the rest.
  if v_seg_first is not null then
    if p_part.head_offset - v_seg_first + 1 < v_max_msgs and p_created - v_seg_started < make_interval(secs => v_max_age) then
      v_to := least(v_head, v_seg_first + v_max_msgs - 1);
      update queen.log_segments set last_offset = v_to, last_created_at = p_created
       where partition_id = p_part.id and first_offset = v_seg_first;
      if found then v_from := v_to + 1; else v_seg_first := null; end if;
    end if;
  end if;
  while v_from <= v_head loop
    if v_seg_first is not null then
      update queen.log_segments set sealed = true where partition_id = p_part.id and first_offset = v_seg_first;
    end if;
    v_to := least(v_head, v_from + v_max_msgs - 1);
    insert into queen.log_segments (partition_id, first_offset, last_offset, first_created_at, last_created_at)
    values (p_part.id, v_from, v_to, p_created, p_created);
    v_seg_first   := v_from;
    v_seg_started := p_created;
    v_from        := v_to + 1;
  end loop;

  update queen.partitions
     set head_offset = v_head, last_created_at = p_created, last_activity = now(),
         segment_first = v_seg_first, segment_started_at = v_seg_started,
         first_offset = least(first_offset, p_part.head_offset + 1),
         -- Set when the partition was empty (migration 030), else left as
         -- it was: an indexed column, so the update stays HOT.
         retained_since = coalesce(retained_since, p_created)
   where id = p_part.id;

  -- The partition is pending for every group that pops the queue by
  -- wildcard (queen.pending, migration 027). The queue's pending lock,
  -- shared: a group's first wildcard pop takes it exclusively
  -- (queen.log_pending_start_v1), so it either waits for this push to
  -- commit and sees the new head, or this push waits for it and then reads
  -- its listing. Only a missing row is written: a row already there stays
  -- as it is (its since, a lower bound of the oldest pending message, stays
  -- one; a pop reads the partition's head itself, and drops a drained row
  -- only under this partition's row lock, queen.log_pending_drop_v1), so a
  -- push to a partition already pending writes nothing here. The probe of
  -- the row comes before the cursor's, which only an insert needs.
  -- The lock is taken here directly, not through queen.log_pending_lock_v1
  -- (same keys): a push pays for every statement. The probe runs after the
  -- lock, so a listing that committed before it is seen.
  -- A queue no group pops by wildcard skips the insert after one index probe
  -- (an insert starts up its indexes and conflict arbiter even to write nothing).
  perform pg_advisory_xact_lock_shared(20271, hashtext(p_part.queue_id::text));
  if exists (select 1 from queen.pending_groups g where g.queue_id = p_part.queue_id) then
    insert into queen.pending (queue_id, consumer_group, partition_id, head_offset, since, needs_cursor)
    select p_part.queue_id, g.consumer_group, p_part.id, v_head, p_created,
           not exists (select 1 from queen.cursors c where c.partition_id = p_part.id and c.consumer_group = g.consumer_group)
      from queen.pending_groups g
     where g.queue_id = p_part.queue_id
       and not exists (select 1 from queen.pending x
                        where x.queue_id = p_part.queue_id and x.consumer_group = g.consumer_group and x.partition_id = p_part.id)
    on conflict (queue_id, consumer_group, partition_id) do nothing;
  end if;
end
$$;
