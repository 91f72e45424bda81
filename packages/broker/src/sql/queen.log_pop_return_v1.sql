-- Hands back the tail of what a pop claimed but the broker would not deliver
-- (an encrypted payload it cannot decrypt: encryption never answers data
-- null). p_items: [{partitionId, from, last}], `from` the first offset not
-- delivered, `last` the last one claimed. A lease shrinks to end before
-- `from` (or is released when nothing of it was delivered), charging no
-- failure; an autoAck pop's cursor goes back to `from - 1` if it still
-- stands where that pop left it. Cursor rows ascending (PROTOCOL §4).
-- Answers how many partitions were handed back. An autoAck hand-back puts
-- the partition back in the group's pending set (queen.pending, issue 31),
-- under the queue's pending lock taken first.
create or replace function queen.log_pop_return_v1(p_group text, p_lease_id uuid, p_auto_ack boolean, p_items jsonb) returns int
language plpgsql set enable_seqscan = off as $$
declare
  v_item record;
  v_n    int;
  v_done int := 0;
  v_queue uuid;
begin
  if p_auto_ack then
    for v_queue in
      select distinct g.queue_id from queen.partitions p
        join queen.pending_groups g on g.queue_id = p.queue_id and g.consumer_group = p_group
       where p.id in (select (e->>'partitionId')::uuid from jsonb_array_elements(p_items) e)
       order by 1
    loop
      perform queen.log_pending_lock_v1(v_queue, false, 5000);
    end loop;
  end if;
  for v_item in
    select (e->>'partitionId')::uuid as pid, (e->>'from')::bigint as from_offset, (e->>'last')::bigint as last_offset
      from jsonb_array_elements(p_items) e
     order by 1
  loop
    perform 1 from queen.cursors c where c.partition_id = v_item.pid and c.consumer_group = p_group for update;
    if p_auto_ack then
      update queen.cursors c set cursor_offset = v_item.from_offset - 1
       where c.partition_id = v_item.pid and c.consumer_group = p_group
         and c.cursor_offset = v_item.last_offset and c.lease_id is null;
      insert into queen.pending as pp (queue_id, consumer_group, partition_id, head_offset, since)
      select p.queue_id, p_group, p.id, p.head_offset, coalesce(m.created_at, now())
        from queen.partitions p
        join queen.pending_groups g on g.queue_id = p.queue_id and g.consumer_group = p_group
        left join queen.messages m on m.partition_id = p.id and m.msg_offset = v_item.from_offset
       where p.id = v_item.pid and p.head_offset >= v_item.from_offset
      on conflict (queue_id, consumer_group, partition_id)
      do update set head_offset = greatest(pp.head_offset, excluded.head_offset), since = least(pp.since, excluded.since);
    else
      update queen.cursors c
         set lease_last_offset = case when v_item.from_offset - 1 > c.cursor_offset then v_item.from_offset - 1 end,
             lease_id          = case when v_item.from_offset - 1 > c.cursor_offset then c.lease_id end,
             lease_expires_at  = case when v_item.from_offset - 1 > c.cursor_offset then c.lease_expires_at end
       where c.partition_id = v_item.pid and c.consumer_group = p_group and c.lease_id = p_lease_id;
    end if;
    get diagnostics v_n = row_count;
    v_done := v_done + v_n;
  end loop;
  return v_done;
end
$$;
