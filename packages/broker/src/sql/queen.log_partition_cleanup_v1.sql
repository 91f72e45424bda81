-- Partition cleanup (PROTOCOL §3.9): a partition with no retained message
-- and no push for p_inactive_s seconds is deleted with its cursors, unless a
-- stream state row references it or a lease on it is live (vetoed). Lock
-- order (§4): every candidate partition row ascending first (re-checked under
-- the lock: a push may have landed meanwhile), then their cursor rows.
-- Answers the deleted partitions as [queue, partition] pairs: a broker
-- forgets exactly those ids (not every cached partition of their queues).
-- The candidates come from partitions_empty (the partitions whose
-- retained_since is null: those that retain nothing, migration 030): a pass
-- reads the empty partitions, not all of them (issue 31), so its cost
-- follows those it deletes, those waiting for p_inactive_s to pass and
-- those vetoed. The planner settings: planned while every partition was
-- empty, it must still read only the empty ones once they are few among
-- many; and a partition's first push leaves the entry of its empty row
-- version in partitions_empty until vacuum: a plain index scan marks it
-- dead on its first visit for the next passes to skip, a bitmap scan would
-- visit it again at every pass.
create or replace function queen.log_partition_cleanup_v1(p_inactive_s bigint) returns jsonb
language plpgsql set enable_seqscan = off set enable_bitmapscan = off as $$
declare
  v_state    boolean := to_regclass('queen_streams.state') is not null;
  v_cands    uuid[];
  v_doomed   uuid[] := '{}';
  v_id       uuid;
  v_ref      boolean;
  v_vetoed   int := 0;
  v_gone     jsonb;
begin
  select coalesce(array_agg(s.id), '{}') into v_cands from (
    select p.id from queen.partitions p
     where p.retained_since is null and p.head_offset < p.first_offset and p.last_activity < now() - make_interval(secs => p_inactive_s)
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
  select coalesce(jsonb_agg(jsonb_build_array(p.queue_name, p.name)), '[]') into v_gone from queen.partitions p where p.id = any(v_doomed);
  delete from queen.messages m where m.partition_id = any(v_doomed);
  delete from queen.log_segments s where s.partition_id = any(v_doomed);
  delete from queen.failures f where f.partition_id = any(v_doomed);
  delete from queen.dlq d where d.partition_id = any(v_doomed);
  delete from queen.cursors c where c.partition_id = any(v_doomed);
  delete from queen.pending pp where pp.partition_id = any(v_doomed);
  delete from queen.partitions p where p.id = any(v_doomed);
  return jsonb_build_object('deleted', cardinality(v_doomed), 'vetoed', v_vetoed, 'partitions', v_gone);
end
$$;
