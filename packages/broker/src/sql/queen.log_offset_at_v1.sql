-- Where a timestamp seek lands: the greatest retained offset created at or
-- before p_ts, 0 when none.
create or replace function queen.log_offset_at_v1(p_partition_id uuid, p_ts timestamptz) returns bigint
language sql stable as $$
  select coalesce(max(m.msg_offset), 0) from queen.messages m where m.partition_id = p_partition_id and m.created_at <= p_ts
$$;
