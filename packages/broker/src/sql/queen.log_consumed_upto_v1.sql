-- The offset up to which every reader of a partition has consumed, for the
-- completed-retention rule: the least of the cursors on it and, for each
-- subscribed group and each stream query of the queue (default group
-- `streams.<name>`) without a cursor row there, the offset its cursor would
-- start at (its subscription start; 0 = from the beginning). Null = nobody
-- reads the queue, so nothing counts as completed.
create or replace function queen.log_consumed_upto_v1(p_partition_id uuid) returns bigint
language plpgsql stable set enable_seqscan = off as $$
declare
  v_queue_id uuid;
  v_queue    text;
  v_streams  boolean := to_regclass('queen_streams.queries') is not null;
  v_min      bigint;
  v_groups   text[];
begin
  select p.queue_id, q.name into v_queue_id, v_queue
    from queen.partitions p join queen.queues q on q.id = p.queue_id where p.id = p_partition_id;
  select min(c.cursor_offset) into v_min from queen.cursors c where c.partition_id = p_partition_id;
  select coalesce(array_agg(s.consumer_group), '{}') into v_groups
    from queen.subscriptions s where s.queue_id = v_queue_id;
  if v_streams then
    execute 'select $1 || coalesce(array_agg(''streams.'' || q.name), ''{}'') from queen_streams.queries q where q.source_queue = $2'
       into v_groups using v_groups, v_queue;
  end if;
  select least(v_min, min(queen.log_cursor_start_v1(p_partition_id, g.name))) into v_min
    from unnest(v_groups) g(name)
   where not exists (select 1 from queen.cursors c where c.partition_id = p_partition_id and c.consumer_group = g.name);
  return v_min;
end
$$;
