-- A failed cycle element, by catalogue code only: the broker words it
-- (errors.ts). p_extra: fields the answer carries besides {code}.
create or replace function queen_streams.fail_v2(p_code text, p_extra jsonb default '{}'::jsonb) returns void
language plpgsql as $$
begin
  raise exception using errcode = 'QS001', message = p_code, detail = '', hint = p_extra::text;
end
$$;
