-- Acks, in the caller's transaction, through queen.log_ack_v2 (the ack of
-- POST /api/v1/ack: the same lock, lease fence and cursor move). Any item
-- that fails (LEASE_EXPIRED, MESSAGE_NOT_FOUND, ...) raises QS001 with its
-- code as the message and every item's result in the hint, so the caller's
-- transaction is aborted: its own writes cannot commit beside an ack that
-- did not happen, even if the caller catches the error and sends COMMIT
-- (PostgreSQL then rolls back). The answer is log_ack_v2's otherwise.
create or replace function queen.app_ack_v1(p_group text, p_items jsonb) returns jsonb
language plpgsql as $$
declare
  v_answer jsonb := (select a.r_answer from queen.log_ack_v2(p_group, p_items, null, null, null, null) a);
  v_failed jsonb;
begin
  if jsonb_typeof(v_answer) = 'array' then
    select e into v_failed
      from jsonb_array_elements(v_answer) e
     where not (e->>'success')::boolean
     order by (e->>'index')::int
     limit 1;
    if v_failed is not null then
      raise exception using errcode = 'QS001', message = coalesce(v_failed->>'code', 'MESSAGE_NOT_FOUND'),
        hint = jsonb_build_object('results', v_answer)::text;
    end if;
  end if;
  return v_answer;
end
$$;
