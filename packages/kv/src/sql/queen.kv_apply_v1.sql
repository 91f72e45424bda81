-- The KV's failures by catalogue code only (issue 14): kv_apply_v1 as in
-- 001, without the texts it wrote beside each code, which had drifted from
-- the error catalogue in @queen-mq/protocol. The broker words a failure from
-- the catalogue, naming the failing op's key (store.ts applyKvOps).
-- Answers {ok:true, results:[…]} or {ok:false, index, code, currentVersion?}.
create or replace function queen.kv_apply_v1(p_ops jsonb) returns jsonb
language plpgsql as $$
declare
  v_lock     record;
  v_op       jsonb;
  v_i        int := 0;
  v_ns       text;
  v_key      text;
  v_row      queen.kv%rowtype;
  v_live     boolean;
  v_version  bigint;
  v_current  bigint;
  v_orig     jsonb;
  v_expires  timestamptz;
  v_cur      numeric;
  v_new      numeric;
  v_out      jsonb[] := '{}';
  c_limit    constant numeric := 9007199254740991;
begin
  for v_lock in
    select distinct hashtext(e->>'namespace' || '/' || (e->>'key')) as h
      from jsonb_array_elements(p_ops) e order by 1
  loop
    perform pg_advisory_xact_lock(7163, v_lock.h);
  end loop;
  perform 1 from queen.kv k
   where (k.namespace, k.key) in (select e->>'namespace', e->>'key' from jsonb_array_elements(p_ops) e)
   order by k.namespace, k.key
     for update;
  -- Committed versions, locked and so stable until commit: a conflict reports
  -- these, never a version an earlier op of this (rolled back) call wrote.
  select coalesce(jsonb_object_agg(k.namespace || '/' || k.key, k.version), '{}') into v_orig
    from queen.kv k
   where (k.namespace, k.key) in (select e->>'namespace', e->>'key' from jsonb_array_elements(p_ops) e)
     and queen.kv_live(k.expires_at);

  for v_op in select e from jsonb_array_elements(p_ops) e loop
    v_ns := v_op->>'namespace';
    v_key := v_op->>'key';
    select * into v_row from queen.kv where namespace = v_ns and key = v_key;
    v_live := found and queen.kv_live(v_row.expires_at);
    -- 0 stands for "absent" (expectedVersion 0 = create-only).
    v_current := case when v_live then v_row.version else 0 end;

    if v_op->>'op' = 'set' then
      if v_op ? 'expectedVersion' and (v_op->>'expectedVersion')::bigint <> v_current then
        return jsonb_build_object('ok', false, 'index', v_i, 'code', 'VERSION_CONFLICT', 'currentVersion', coalesce((v_orig->>(v_ns || '/' || v_key))::bigint, 0));
      end if;
      v_version := nextval('queen.kv_version_seq');
      v_expires := case when v_op ? 'ttlSeconds' then now() + make_interval(secs => (v_op->>'ttlSeconds')::int) end;
      insert into queen.kv as k (namespace, key, value, version, expires_at, updated_at)
      values (v_ns, v_key, v_op->'value', v_version, v_expires, now())
      on conflict (namespace, key) do update
        set value = excluded.value, version = excluded.version, expires_at = excluded.expires_at, updated_at = excluded.updated_at
      returning * into v_row;
      v_out := array_append(v_out, jsonb_build_object('op', 'set', 'namespace', v_ns, 'key', v_key,
        'value', v_row.value, 'version', v_row.version, 'applied', true, 'deleted', false, 'created', not v_live,
        'expiresAt', queen.iso(v_row.expires_at), 'updatedAt', queen.iso(v_row.updated_at)));

    elsif v_op->>'op' = 'delete' then
      if v_op ? 'expectedVersion' and (v_op->>'expectedVersion')::bigint <> v_current then
        return jsonb_build_object('ok', false, 'index', v_i, 'code', 'VERSION_CONFLICT', 'currentVersion', coalesce((v_orig->>(v_ns || '/' || v_key))::bigint, 0));
      end if;
      if v_live then
        delete from queen.kv where namespace = v_ns and key = v_key;
      end if;
      v_out := array_append(v_out, jsonb_build_object('op', 'delete', 'namespace', v_ns, 'key', v_key,
        'value', null, 'version', null, 'applied', true, 'deleted', v_live));

    elsif v_op->>'op' = 'incr' then
      if v_live then
        if jsonb_typeof(v_row.value) <> 'number' then
          return jsonb_build_object('ok', false, 'index', v_i, 'code', 'KV_TYPE_MISMATCH');
        end if;
        v_cur := (v_row.value)::numeric;
        if v_cur <> trunc(v_cur) or abs(v_cur) > c_limit then
          return jsonb_build_object('ok', false, 'index', v_i, 'code', 'KV_TYPE_MISMATCH');
        end if;
      else
        v_cur := 0;
      end if;
      v_new := v_cur + coalesce((v_op->>'by')::numeric, 1);
      if v_op ? 'max' and jsonb_typeof(v_op->'max') = 'number' and v_new > (v_op->>'max')::numeric then
        -- Admission denied: nothing written, the current value answered.
        if coalesce((v_op->>'requireApplied')::boolean, false) then
          return jsonb_build_object('ok', false, 'index', v_i, 'code', 'KV_MAX_EXCEEDED');
        end if;
        v_out := array_append(v_out, jsonb_build_object('op', 'incr', 'namespace', v_ns, 'key', v_key,
          'value', v_cur::bigint, 'version', case when v_live then v_row.version end, 'applied', false, 'deleted', false,
          'expiresAt', case when v_live then queen.iso(v_row.expires_at) end));
      else
        if abs(v_new) > c_limit then
          return jsonb_build_object('ok', false, 'index', v_i, 'code', 'KV_TYPE_MISMATCH');
        end if;
        v_version := nextval('queen.kv_version_seq');
        -- ttlSeconds applies only when this incr creates the key (fixed window counter).
        v_expires := case when v_live then v_row.expires_at
                          when v_op ? 'ttlSeconds' then now() + make_interval(secs => (v_op->>'ttlSeconds')::int) end;
        insert into queen.kv as k (namespace, key, value, version, expires_at, updated_at)
        values (v_ns, v_key, to_jsonb(v_new::bigint), v_version, v_expires, now())
        on conflict (namespace, key) do update
          set value = excluded.value, version = excluded.version, expires_at = excluded.expires_at, updated_at = excluded.updated_at
        returning * into v_row;
        v_out := array_append(v_out, jsonb_build_object('op', 'incr', 'namespace', v_ns, 'key', v_key,
          'value', v_new::bigint, 'version', v_row.version, 'applied', true, 'deleted', false,
          'expiresAt', queen.iso(v_row.expires_at)));
      end if;
    end if;
    v_i := v_i + 1;
  end loop;
  return jsonb_build_object('ok', true, 'results', to_jsonb(v_out));
end
$$;
