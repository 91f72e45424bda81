-- 003's form, still called by queen_streams.apply_state_ops_v1 (006): its
-- text is dropped, so every element failure is answered by code alone.
create or replace function queen_streams.fail(p_code text, p_error text, p_extra jsonb default '{}'::jsonb) returns void
language plpgsql as $$
begin
  perform queen_streams.fail_v2(p_code, p_extra);
end
$$;
