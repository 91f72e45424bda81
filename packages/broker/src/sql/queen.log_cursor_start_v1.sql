-- Where a (partition, group) cursor starts the first time the group touches
-- the partition: the greatest offset created at or before the subscription
-- start ("0" for the beginning and for queue mode).
create or replace function queen.log_cursor_start_v1(p_partition_id uuid, p_group text) returns bigint
language plpgsql stable set enable_seqscan = off as $$
declare
  v_start timestamptz;
begin
  select s.start_at into v_start
    from queen.subscriptions s join queen.partitions p on p.queue_id = s.queue_id
   where p.id = p_partition_id and s.consumer_group = p_group;
  if v_start is null then return 0; end if;
  return coalesce((select max(msg_offset) from queen.messages
                    where partition_id = p_partition_id and created_at <= v_start), 0);
end
$$;
