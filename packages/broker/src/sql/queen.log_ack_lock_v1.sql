-- Cursor rows of (p_group, each partition in p_pids) that exist as partitions:
-- missing ones inserted ascending (two requests creating the same rows in
-- opposite orders would wait on each other's insert), then all of them
-- locked ascending (PROTOCOL §4 rank 5).
create or replace function queen.log_ack_lock_v1(p_group text, p_pids uuid[]) returns void
language plpgsql as $$
begin
  insert into queen.cursors (partition_id, consumer_group, cursor_offset)
  select p.id, p_group, queen.log_cursor_start_v1(p.id, p_group)
    from queen.partitions p
   where p.id = any(p_pids)
     and not exists (select 1 from queen.cursors c where c.partition_id = p.id and c.consumer_group = p_group)
   order by p.id
  on conflict do nothing;
  perform 1 from queen.cursors c
   where c.consumer_group = p_group and c.partition_id = any(p_pids)
   order by c.partition_id, c.consumer_group for update;
end
$$;
