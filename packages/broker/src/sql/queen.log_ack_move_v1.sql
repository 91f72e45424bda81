-- The one cursor move of every ack path: each partition in p_pids moves to
-- the highest offset given for it. A call whose items all name one partition
-- (what one pop's consumer acks: a hundred copies of one partition for a
-- 100-item ack) moves it with the two single-row statements on its key,
-- instead of the array form's group-by over the items joined to the cursors
-- (and the same again for the failure records). Same outcome either way.
create or replace function queen.log_ack_move_v1(p_group text, p_pids uuid[], p_offsets bigint[], p_release boolean default null) returns void
language plpgsql set enable_seqscan = off as $$
declare
  v_pid  uuid := p_pids[1];
  v_last bigint;
begin
  if cardinality(p_pids) = 1 or v_pid = all(p_pids) then
    -- One partition (a cycle's source ack, each step of the walk, one pop's
    -- ack): the statements on its key alone cost about half the array
    -- form's (measured).
    v_last := case when cardinality(p_offsets) = 1 then p_offsets[1] else (select max(o) from unnest(p_offsets) o) end;
    update queen.cursors c
       set cursor_offset = greatest(c.cursor_offset, v_last),
           last_acked_at = now(),
           lease_id          = case when queen.log_ack_ends_lease_v1(p_release, c.cursor_offset, c.lease_last_offset, v_last) then null else c.lease_id end,
           lease_expires_at  = case when queen.log_ack_ends_lease_v1(p_release, c.cursor_offset, c.lease_last_offset, v_last) then null else c.lease_expires_at end,
           lease_last_offset = case when queen.log_ack_ends_lease_v1(p_release, c.cursor_offset, c.lease_last_offset, v_last) then null else c.lease_last_offset end
     where c.partition_id = v_pid and c.consumer_group = p_group;
    delete from queen.failures f
     where f.partition_id = v_pid and f.consumer_group = p_group and f.msg_offset <= v_last;
    return;
  end if;
  update queen.cursors c
     set cursor_offset = greatest(c.cursor_offset, m.last),
         last_acked_at = now(),
         lease_id          = case when queen.log_ack_ends_lease_v1(p_release, c.cursor_offset, c.lease_last_offset, m.last) then null else c.lease_id end,
         lease_expires_at  = case when queen.log_ack_ends_lease_v1(p_release, c.cursor_offset, c.lease_last_offset, m.last) then null else c.lease_expires_at end,
         lease_last_offset = case when queen.log_ack_ends_lease_v1(p_release, c.cursor_offset, c.lease_last_offset, m.last) then null else c.lease_last_offset end
    from (select i.pid, max(i.off) as last from unnest(p_pids, p_offsets) as i(pid, off) group by i.pid) m
   where c.partition_id = m.pid and c.consumer_group = p_group;
  delete from queen.failures f
   using (select i.pid, max(i.off) as last from unnest(p_pids, p_offsets) as i(pid, off) group by i.pid) m
   where f.partition_id = m.pid and f.consumer_group = p_group and f.msg_offset <= m.last;
end
$$;
