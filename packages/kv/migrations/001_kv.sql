-- The KV (PROTOCOL §6). Never called state: stream state is
-- queen_streams.state. Keys compare bytewise (collate "C"), so listing order
-- and `after` cursors do not depend on the database's locale.

create table queen.kv (
  namespace   text collate "C" not null,
  key         text collate "C" not null,
  value       jsonb not null,
  version     bigint not null,
  expires_at  timestamptz,
  updated_at  timestamptz not null default now(),
  primary key (namespace, key)
);
create index kv_expires_at on queen.kv (expires_at) where expires_at is not null;

-- Versions come from one sequence: they strictly increase on every write and
-- are never reused for a key, even across delete and re-create.
create sequence queen.kv_version_seq;

-- A live row (expired rows are absent for every operation until purged).
create function queen.kv_live(p_expires_at timestamptz) returns boolean
language sql stable as $$ select p_expires_at is null or p_expires_at > now() $$;

-- Applies KV ops in the caller's transaction. p_ops: [{op:"set", namespace,
-- key, value, ttlSeconds?, expectedVersion?} | {op:"incr", namespace, key,
-- by, max?, ttlSeconds?, requireApplied?} | {op:"delete", namespace, key,
-- expectedVersion?}].
-- Lock order (PROTOCOL §4, rank 1), all taken up front before the first op:
--   1. a transaction advisory lock per distinct (namespace, key), ascending by
--      lock key: it stands for the row when the key is absent, so two
--      creating incrs serialise instead of racing to insert;
--   2. the existing rows, ascending (namespace, key).
-- The advisory locks use the two-int4 form (class 7163, hash) whose key space
-- is separate from the bigint form the stream cycle and maintenance use.
-- Answers {ok:true, results:[…]} with one result per op in array order, or
-- {ok:false, index, code, message, currentVersion?} on the first failing op
-- (currentVersion = the committed version, 0 when absent);
-- the caller rolls back then (a failure must leave nothing written).
create function queen.kv_apply_v1(p_ops jsonb) returns jsonb
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
        return jsonb_build_object('ok', false, 'index', v_i, 'code', 'VERSION_CONFLICT',
          'message', format('Version conflict on %s/%s', v_ns, v_key), 'currentVersion', coalesce((v_orig->>(v_ns || '/' || v_key))::bigint, 0));
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
        return jsonb_build_object('ok', false, 'index', v_i, 'code', 'VERSION_CONFLICT',
          'message', format('Version conflict on %s/%s', v_ns, v_key), 'currentVersion', coalesce((v_orig->>(v_ns || '/' || v_key))::bigint, 0));
      end if;
      if v_live then
        delete from queen.kv where namespace = v_ns and key = v_key;
      end if;
      v_out := array_append(v_out, jsonb_build_object('op', 'delete', 'namespace', v_ns, 'key', v_key,
        'value', null, 'version', null, 'applied', true, 'deleted', v_live));

    elsif v_op->>'op' = 'incr' then
      if v_live then
        if jsonb_typeof(v_row.value) <> 'number' then
          return jsonb_build_object('ok', false, 'index', v_i, 'code', 'KV_TYPE_MISMATCH',
            'message', format('%s/%s does not hold an integer', v_ns, v_key));
        end if;
        v_cur := (v_row.value)::numeric;
        if v_cur <> trunc(v_cur) or abs(v_cur) > c_limit then
          return jsonb_build_object('ok', false, 'index', v_i, 'code', 'KV_TYPE_MISMATCH',
            'message', format('%s/%s does not hold an integer in ±(2^53−1)', v_ns, v_key));
        end if;
      else
        v_cur := 0;
      end if;
      v_new := v_cur + coalesce((v_op->>'by')::numeric, 1);
      if v_op ? 'max' and jsonb_typeof(v_op->'max') = 'number' and v_new > (v_op->>'max')::numeric then
        -- Admission denied: nothing written, the current value answered.
        if coalesce((v_op->>'requireApplied')::boolean, false) then
          return jsonb_build_object('ok', false, 'index', v_i, 'code', 'KV_MAX_EXCEEDED',
            'message', format('Increment of %s/%s would exceed max %s', v_ns, v_key, v_op->>'max'));
        end if;
        v_out := array_append(v_out, jsonb_build_object('op', 'incr', 'namespace', v_ns, 'key', v_key,
          'value', v_cur::bigint, 'version', case when v_live then v_row.version end, 'applied', false, 'deleted', false,
          'expiresAt', case when v_live then queen.iso(v_row.expires_at) end));
      else
        if abs(v_new) > c_limit then
          return jsonb_build_object('ok', false, 'index', v_i, 'code', 'KV_TYPE_MISMATCH',
            'message', format('Increment of %s/%s leaves ±(2^53−1)', v_ns, v_key));
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

-- Maintenance (`kv` task): deletes expired rows. Rows a writer holds are
-- skipped, never waited for (the writer replaces or keeps them); the next
-- pass gets them. Answers the number purged.
create function queen.kv_purge_expired_v1() returns int
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
