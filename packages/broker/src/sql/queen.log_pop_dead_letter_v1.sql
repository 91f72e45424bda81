-- A pop hands over what it claimed but will not deliver (pop.ts, encryption
-- never answers data null), per partition, ascending (PROTOCOL §4):
--   dead   the offsets of a run of messages at the head of the partition that
--          can never be delivered (a payload that does not decrypt with this
--          broker's key, which every replica shares: retrying cannot help).
--          Each is dead-lettered for p_group with p_error, and the cursor
--          moves past the run, ending the lease when that covers all it
--          delivered (an autoAck pop's cursor is past them already). Checked
--          first: they are the head (the lease is this pop's and nothing
--          retained lies between the cursor and them), else skipped.
--   from, last  (optional) the tail handed back as queen.log_pop_return_v1 does.
-- p_items: [{partitionId, dead?: [offsets ascending], from?, last?}].
-- Answers how many messages were dead-lettered.
create or replace function queen.log_pop_dead_letter_v1(p_group text, p_lease_id uuid, p_auto_ack boolean, p_error text, p_items jsonb) returns int
language plpgsql set enable_seqscan = off as $$
declare
  v_item  record;
  v_cur   queen.cursors%rowtype;
  v_first bigint;
  v_last  bigint;
  v_dead  int := 0;
begin
  for v_item in
    select (e->>'partitionId')::uuid as pid, e->'dead' as dead, e->'from' as from_offset, e->'last' as last_offset
      from jsonb_array_elements(p_items) e
     order by 1
  loop
    select * into v_cur from queen.cursors c where c.partition_id = v_item.pid and c.consumer_group = p_group for update;
    if jsonb_array_length(coalesce(v_item.dead, '[]'::jsonb)) > 0 then
      v_first := (v_item.dead->>0)::bigint;
      v_last := (v_item.dead->>-1)::bigint;
      if (p_auto_ack and v_cur.lease_id is null and v_cur.cursor_offset >= v_last)
         or (not p_auto_ack and v_cur.lease_id = p_lease_id and queen.log_advance_v1(v_item.pid, v_cur.cursor_offset, 1) = v_first) then
        perform queen.log_dead_letter_v1(v_item.pid, p_group, d.off, p_error, coalesce(f.retry_count, 0))
           from (select x::bigint as off from jsonb_array_elements_text(v_item.dead) x) d
           left join queen.failures f on f.partition_id = v_item.pid and f.consumer_group = p_group and f.msg_offset = d.off;
        if not p_auto_ack then
          perform queen.log_ack_move_v1(p_group, array[v_item.pid], array[v_last]);
        end if;
        v_dead := v_dead + jsonb_array_length(v_item.dead);
      end if;
    end if;
    if v_item.from_offset is not null then
      perform queen.log_pop_return_v1(p_group, p_lease_id, p_auto_ack,
        jsonb_build_array(jsonb_build_object('partitionId', v_item.pid, 'from', v_item.from_offset, 'last', v_item.last_offset)));
    end if;
  end loop;
  return v_dead;
end
$$;
