-- Maintenance (`kv` task): deletes expired rows. Rows a writer holds are
-- skipped, never waited for (the writer replaces or keeps them); the next
-- pass gets them. Answers the number purged.
create or replace function queen.kv_purge_expired_v1() returns int
language plpgsql as $$
declare
  v_n int;
begin
  with doomed as (
    select namespace, key from queen.kv
     where expires_at is not null and expires_at <= now()
     order by namespace, key
       for update skip locked
  )
  delete from queen.kv k using doomed d where k.namespace = d.namespace and k.key = d.key;
  get diagnostics v_n = row_count;
  return v_n;
end
$$;
