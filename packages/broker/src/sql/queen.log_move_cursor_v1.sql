-- 002's single move, kept for its callers (an autoAck pop), now the same
-- move. Answers true when a lease existed and this move ended it.
create or replace function queen.log_move_cursor_v1(p_partition_id uuid, p_group text, p_offset bigint) returns boolean
language plpgsql set enable_seqscan = off as $$
declare
  v_released boolean;
begin
  select c.lease_id is not null and queen.log_ack_ends_lease_v1(null, c.cursor_offset, c.lease_last_offset, p_offset) into v_released
    from queen.cursors c where c.partition_id = p_partition_id and c.consumer_group = p_group;
  perform queen.log_ack_move_v1(p_group, array[p_partition_id], array[p_offset]);
  return coalesce(v_released, false);
end
$$;
