-- A stream cycle's KV reads (a lookup), locked before the cycle takes its
-- own locks (PROTOCOL §4: KV is rank 1, the stream shard rank 3): the same
-- advisory locks kv_apply_v1 takes, shared, in its order. A writer of one of
-- these keys then waits for the cycle to commit, so the versions the cycle
-- checks (kv_read_check_v1) are still the committed ones at its commit.
create or replace function queen.kv_read_lock_v1(p_elements jsonb) returns void
language plpgsql as $$
declare
  v_lock record;
begin
  for v_lock in
    select distinct hashtext(r->>'namespace' || '/' || (r->>'key')) as h
      from jsonb_array_elements(p_elements) e, jsonb_array_elements(coalesce(e->'kv_reads', '[]'::jsonb)) r
     order by 1
  loop
    perform pg_advisory_xact_lock_shared(7163, v_lock.h);
  end loop;
end
$$;
