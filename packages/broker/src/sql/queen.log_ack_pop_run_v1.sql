-- The ack of a pop's run: what a consumer sends after a pop (one partition,
-- one lease or none, every item completed, with the offset the pop answered),
-- taken as arrays, which PostgreSQL reads for a fraction of what the same
-- items cost as jsonb. Its checks are the walk's (queen.log_ack_walk_v1),
-- item for item, stated over the whole run:
--   * no offset repeats, and each holds the message its id names
--     (queen.log_ack_run_holds_v1);
--   * the cursor row exists and is locked;
--   * queen.log_ack_fence_v1 passes for every item: its checks are monotonic
--     in the offset, so the lowest and the highest offsets decide.
-- When all hold, the cursor moves through queen.log_ack_move_v1 (the one move
-- of every ack path) and the one row answers which offset ended the lease
-- (the first to reach the lease's last offset, as in the walk) and the
-- partition's names. When any fails it answers no row and has written
-- nothing: queen.log_ack_v2 then takes the run as jsonb items.
create or replace function queen.log_ack_pop_run_v1(p_group text, p_partition_id uuid, p_lease uuid, p_offsets bigint[], p_txids text[])
returns table (r_released bigint, r_queue_name text, r_partition_name text)
language plpgsql set enable_seqscan = off as $$
declare
  v_n   int := cardinality(p_offsets);
  v_lo  bigint;
  v_hi  bigint;
  v_cur queen.cursors%rowtype;
begin
  if v_n = 0 or cardinality(p_txids) is distinct from v_n
     or (select count(distinct o) from unnest(p_offsets) o) <> v_n
     or not queen.log_ack_run_holds_v1(p_partition_id, p_offsets, p_txids) then
    return;
  end if;
  select min(o), max(o) into v_lo, v_hi from unnest(p_offsets) o;

  select * into v_cur from queen.cursors c
   where c.partition_id = p_partition_id and c.consumer_group = p_group
     for update;
  if not found
     or queen.log_ack_fence_v1(v_lo, p_lease, v_cur.cursor_offset, v_cur.lease_id, v_cur.lease_expires_at, v_cur.lease_last_offset, false) is not null
     or queen.log_ack_fence_v1(v_hi, p_lease, v_cur.cursor_offset, v_cur.lease_id, v_cur.lease_expires_at, v_cur.lease_last_offset, false) is not null then
    return;
  end if;

  perform queen.log_ack_move_v1(p_group, array[p_partition_id], array[v_hi]);
  return query
    select case when v_cur.lease_id is not null then (select min(o) from unnest(p_offsets) o where o >= v_cur.lease_last_offset) end,
           p.queue_name, p.name
      from queen.partitions p
     where p.id = p_partition_id;
end
$$;
