-- The first of a cycle's KV reads whose version is no longer the live one
-- (0: absent or expired), as {key: 'kv:<ns>/<key>', currentVersion}, or null.
create or replace function queen.kv_read_check_v1(p_reads jsonb) returns jsonb
language sql stable as $$
  select jsonb_build_object('key', 'kv:' || (r->>'namespace') || '/' || (r->>'key'), 'currentVersion', coalesce(k.version, 0))
    from jsonb_array_elements(p_reads) with ordinality as t(r, n)
    left join queen.kv k on k.namespace = r->>'namespace' and k.key = r->>'key' and queen.kv_live(k.expires_at)
   where coalesce(k.version, 0) <> (r->>'version')::bigint
   order by n
   limit 1
$$;
