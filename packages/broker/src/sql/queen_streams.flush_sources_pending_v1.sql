-- A join's idle flush (issue 42) guards the source partitions it names by
-- queue and partition name (`flush_sources`), not its own partition_id: a
-- join's state lives on a shard of its own, and the flush expires held
-- records on both queues' clocks. Each source is judged as
-- queen_streams.flush_pending_v1 judges a window's partition.
--
-- A source partition that does not exist yet may still be in the making: an
-- application's transaction (queen.app_enqueue_v1) creates its partition and
-- stamps its messages inside that transaction, and commits whenever it
-- commits. Creating the partition ourselves, in a subtransaction rolled back
-- at once, waits for such a creator (an insert waits on the uncommitted row
-- it conflicts with) and leaves nothing behind; after it, a new statement
-- sees the partition if its creator committed. A push over HTTP creates its
-- partitions in a transaction of their own before it stamps anything, so it
-- is seen by the first look already.
create or replace function queen_streams.flush_sources_pending_v1(p_sources jsonb, p_group text, p_before timestamptz) returns boolean
language plpgsql as $$
declare
  v_src jsonb;
  v_pid uuid;
begin
  for v_src in select s from jsonb_array_elements(p_sources) s loop
    select p.id into v_pid from queen.partitions p
     where p.queue_id = (select q.id from queen.queues q where q.name = v_src->>'queue') and p.name = v_src->>'partition';
    if v_pid is null then
      begin
        perform queen.ensure_partitions_v1(jsonb_build_array(v_src));
        raise exception using errcode = 'QS002';
      exception when sqlstate 'QS002' then
        null;
      end;
      select p.id into v_pid from queen.partitions p
       where p.queue_id = (select q.id from queen.queues q where q.name = v_src->>'queue') and p.name = v_src->>'partition';
    end if;
    if v_pid is not null and queen_streams.flush_pending_v1(v_pid, p_group, p_before) then
      return true;
    end if;
  end loop;
  return false;
end
$$;
