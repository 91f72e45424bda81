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
--
-- Whether an idle flush closing windows that end at or before p_before must
-- wait (above). The partition row lock is let go as soon as it is
-- granted: holding it to commit would order it before the sink pushes' own
-- partition locks, against a push that takes both the other way round (a
-- deadlock). Letting go is safe: a push that takes the lock after us stamps
-- at or after this moment, which is at or after p_before.
create or replace function queen_streams.flush_pending_v1(p_pid uuid, p_group text, p_before timestamptz) returns boolean
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
