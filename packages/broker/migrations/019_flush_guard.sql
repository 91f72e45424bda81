-- The idle flush's guard (issue 28): an idle flush (an ack:null cycle
-- element) closes windows by the broker's clock, and used to know that a
-- partition had nothing pending only from the source group's lag, read over
-- HTTP before the flush. A push whose items were stamped (createdAt) before
-- a window's end but had not committed yet is invisible to that read (the
-- head has not moved), so the flush closed the window without them; when
-- they were read, the window was made again and its emit answered
-- `duplicate` at the sink: the contribution was lost.
--
-- Now the element may carry `flush_before` (epoch ms). The cycle checks, in
-- its own transaction, before anything of the element is written:
--   * flush_before is not ahead of the clock that stamps createdAt (a push
--     yet to come could still be stamped before it);
--   * a push in flight on the source partition has finished: the allocator
--     (queen.log_append_v1) holds the partition row FOR UPDATE from stamping
--     its items to its commit, so taking the row FOR KEY SHARE waits for it;
--   * no message of the partition stamped before flush_before lies beyond
--     the consumer group's cursor (leased but not acked counts as beyond).
-- If any fails, the element answers FLUSH_DEFERRED and writes nothing.
-- createdAt never decreases with the offset inside a partition (stamped as
-- greatest(clock_timestamp(), last_created_at) under that same lock, and
-- offsets are handed out under it too), so the first message beyond the
-- cursor is the only one to look at: one index probe.
-- Restated here: queen.log_streams_cycle_v1 (008's form plus the guard).
-- New: queen_streams.flush_pending_v1. An element without flush_before (every
-- cycle with an ack) runs exactly as before: one jsonb key test more.

-- Whether an idle flush closing windows that end at or before p_before must
-- wait (see above). The partition row lock is let go as soon as it is
-- granted: holding it to commit would order it before the sink pushes' own
-- partition locks, against a push that takes both the other way round (a
-- deadlock). Letting go is safe: a push that takes the lock after us stamps
-- at or after this moment, which is at or after p_before.
create function queen_streams.flush_pending_v1(p_pid uuid, p_group text, p_before timestamptz) returns boolean
language plpgsql as $$
declare
  v_cursor bigint;
begin
  if p_before > clock_timestamp() then
    return true;
  end if;
  begin
    perform 1 from queen.partitions p where p.id = p_pid for key share;
    -- Rolls the subtransaction back, and with it the row lock: we only waited.
    raise exception using errcode = 'QS002';
  exception when sqlstate 'QS002' then
    null;
  end;
  -- A new snapshot per statement (read committed): the push waited for is visible.
  select c.cursor_offset into v_cursor from queen.cursors c where c.partition_id = p_pid and c.consumer_group = p_group;
  if not found then
    v_cursor := queen.log_cursor_start_v1(p_pid, p_group);
  end if;
  return coalesce((select m.created_at < p_before from queen.messages m
                    where m.partition_id = p_pid and m.msg_offset > v_cursor
                    order by m.msg_offset limit 1), false);
end
$$;

-- PROTOCOL §8, as 008, with the idle flush's guard before the element.
create or replace function queen.log_streams_cycle_v1(p_elements jsonb) returns jsonb
language plpgsql as $$
declare
  v_el      jsonb;
  v_out     jsonb := '[]'::jsonb;
  v_res     jsonb;
  v_base    jsonb;
  v_code    text;
  v_error   text;
  v_extra   text;
begin
  perform 1 from queen_streams.queries q
   where q.query_id in (select (e->>'query_id')::uuid from jsonb_array_elements(p_elements) e)
   order by q.query_id for key share;
  perform pg_advisory_xact_lock(h)
    from (select distinct hashtextextended((e->>'query_id')::uuid::text || ':' || (e->>'partition_id')::uuid::text, 0) as h
            from jsonb_array_elements(p_elements) e
           order by 1) s;

  for v_el in select e from jsonb_array_elements(p_elements) with ordinality as t(e, n) order by n loop
    v_base := jsonb_build_object(
      'query_id', (v_el->>'query_id')::uuid::text, 'partition_id', (v_el->>'partition_id')::uuid::text,
      'queueName', (select p.queue_name from queen.partitions p where p.id = (v_el->>'partition_id')::uuid));
    begin
      -- Under the shard lock taken above: no cycle of this (query, partition) moves the cursor meanwhile.
      if v_el ? 'flush_before' and queen_streams.flush_pending_v1((v_el->>'partition_id')::uuid,
           coalesce(v_el->>'consumer_group', '__QUEUE_MODE__'),
           timestamptz 'epoch' + (v_el->>'flush_before')::bigint * interval '1 millisecond') then
        perform queen_streams.fail_v2('FLUSH_DEFERRED');
      end if;
      v_res := v_base || queen_streams.apply_element(v_el);
    exception when sqlstate 'QS001' then
      get stacked diagnostics v_code = message_text, v_error = pg_exception_detail, v_extra = pg_exception_hint;
      v_res := v_base || jsonb_build_object('success', false, 'state_ops_applied', 0, 'state_results', '[]'::jsonb,
        'push_results', '[]'::jsonb, 'ack_result', null, 'error', nullif(v_error, ''), 'code', v_code)
        || coalesce(nullif(v_extra, '')::jsonb, '{}'::jsonb);
    end;
    v_out := v_out || jsonb_build_array(jsonb_build_object('idx', v_el->'idx', 'result', v_res));
  end loop;
  return v_out;
end
$$;
