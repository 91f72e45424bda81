-- A live row (expired rows are absent for every operation until purged).
create or replace function queen.kv_live(p_expires_at timestamptz) returns boolean
language sql stable as $$ select p_expires_at is null or p_expires_at > now() $$;
