-- Cursor rows of (p_group, each partition in p_pids) that exist as partitions:
-- missing ones inserted ascending (two requests creating the same rows in
-- opposite orders would wait on each other's insert), then all of them
-- locked ascending (PROTOCOL §4 rank 5).
-- The check for a missing
-- cursor row stays a probe of that row per partition (OFFSET 0 keeps the
-- EXISTS from becoming an anti-join). As a join, a plan made on a few rows
-- read every cursor row of the group through the index on
-- (partition_id, consumer_group), comparing partition ids in a filter
-- (auto_explain: Rows Removed by Join Filter: 1,649 for a one-partition ack).
create or replace function queen.log_ack_lock_v1(p_group text, p_pids uuid[]) returns void
language plpgsql
set enable_seqscan = off
as $$
begin
  insert into queen.cursors (partition_id, consumer_group, cursor_offset)
  select p.id, p_group, queen.log_cursor_start_v1(p.id, p_group)
    from queen.partitions p
   where p.id = any(p_pids)
     and not exists (select 1 from queen.cursors c where c.partition_id = p.id and c.consumer_group = p_group offset 0)
   order by p.id
  on conflict do nothing;
  perform 1 from queen.cursors c
   where c.consumer_group = p_group and c.partition_id = any(p_pids)
   order by c.partition_id, c.consumer_group for update;
end
$$;
