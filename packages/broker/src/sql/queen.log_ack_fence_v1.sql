-- The fence of one ack item (PROTOCOL §5.5 steps 2–3, §7.4): null when the
-- item may move the cursor, else the catalogue code. A live lease is the one
-- the item names, unexpired; the item must lie within what it delivered.
-- `p_lease_first`: a stream cycle is fenced by its lease before anything
-- else (a replayed cycle whose lease is gone is LEASE_EXPIRED even when its
-- message is acked, SEED "Why it is exactly-once"); the ack route answers an
-- acked message alreadyAcked first, whatever lease it names (a consumer's
-- retried ack is not an error). One SQL expression, inlined where it is
-- called from a set-based statement.
create or replace function queen.log_ack_fence_v1(
  p_offset bigint, p_lease uuid, p_cursor bigint, p_cur_lease uuid, p_cur_expires timestamptz, p_cur_last bigint, p_lease_first boolean
) returns text
language sql stable parallel safe as $$
  select case
    when p_lease is not null and p_lease_first
         and (p_cur_lease is distinct from p_lease or not coalesce(p_cur_expires > now(), false)) then 'LEASE_EXPIRED'
    when p_offset <= p_cursor then 'ALREADY_ACKED'
    when p_lease is not null
         and (p_cur_lease is distinct from p_lease or not coalesce(p_cur_expires > now(), false)) then 'LEASE_EXPIRED'
    when p_lease is not null and p_offset > p_cur_last then 'MESSAGE_NOT_LEASED'
  end
$$;
