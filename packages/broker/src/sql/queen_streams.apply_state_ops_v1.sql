-- State ops of one cycle element (PROTOCOL §7.4): every op a compare-and-set
-- when it carries expected_version, applied in array order. Measured on a
-- map stream, the op-by-op loop (a SELECT … FOR UPDATE, a nextval and an
-- upsert per key) was most of a cycle's time; with distinct keys (what the
-- engine sends) the same is three statements: lock and read every row, check
-- every expectation, write. Repeated keys keep the op-by-op walk, where a
-- later op sees the earlier one's version. Answers {applied, results}; a
-- failed expectation raises QS001 (the element's savepoint undoes the rest).
-- The plans cached for this function are made knowing neither how many ops
-- come nor how many rows the partition holds: no statement joins the ops to
-- the rows. Keys reach the primary key as an array in the column's
-- collation ("C"; another collation cannot be a condition of that index),
-- versions are drawn before the write, and each expectation is checked by
-- a probe of its own key. Joined instead, a cycle of 1,000 ops on a
-- partition of 4,500 rows compared 4.4 M key pairs (a join's cycles, where
-- every record is a key, grew with the state they held).
create or replace function queen_streams.apply_state_ops_v1(p_qid uuid, p_pid uuid, p_ops jsonb) returns jsonb
language plpgsql set enable_seqscan = off as $$
declare
  v_op       jsonb;
  v_key      text;
  v_expected bigint;
  v_current  bigint;
  v_version  bigint;
  v_bad      record;
  v_results  jsonb := '[]'::jsonb;
  v_applied  int := 0;
  v_keys     text[];
  v_types    text[];
  v_values   jsonb[];
  v_expects  bigint[];
  v_versions bigint[];
  v_distinct boolean;
  v_bad_type text;
  v_has_bad  boolean;
begin
  if jsonb_array_length(p_ops) = 0 then
    return jsonb_build_object('applied', 0, 'results', '[]'::jsonb);
  end if;
  -- The ops read once into arrays; every statement below works on those.
  select array_agg(e->>'key' order by n), array_agg(e->>'type' order by n), array_agg(e->'value' order by n),
         array_agg((e->>'expected_version')::bigint order by n), count(distinct e->>'key') = count(*),
         (array_agg(e->>'type') filter (where e->>'type' is distinct from 'upsert' and e->>'type' is distinct from 'delete'))[1],
         bool_or(e->>'type' is distinct from 'upsert' and e->>'type' is distinct from 'delete')
    into v_keys, v_types, v_values, v_expects, v_distinct, v_bad_type, v_has_bad
    from jsonb_array_elements(p_ops) with ordinality as t(e, n);
  if v_has_bad then
    raise exception 'unknown state op type %', v_bad_type using errcode = '22023';
  end if;

  if v_distinct then
    -- Rows locked in key order (two cycles of one shard already serialise on
    -- the advisory lock; the order keeps a raw caller's overlap deadlock-free).
    perform (select 1 from queen_streams.state x
              where x.query_id = p_qid and x.partition_id = p_pid and x.key = o.key collate "C" for update)
       from (select k as key from unnest(v_keys) as k order by k collate "C" offset 0) o;
    -- A probe per op (a subplan: the planner cannot turn it into a join).
    select o.key, o.expected, coalesce(o.current, 0) as current into v_bad
      from (select u.key, u.type, u.expected, u.ord,
                   (select x.version from queen_streams.state x
                     where x.query_id = p_qid and x.partition_id = p_pid and x.key = u.key collate "C") as current
              from unnest(v_keys, v_types, v_expects) with ordinality as u(key, type, expected, ord)
             where u.expected is not null) o
     where coalesce(o.current, 0) <> o.expected or (o.type = 'delete' and o.current is null)
     order by o.ord limit 1;
    if found then
      perform queen_streams.fail_v2('VERSION_CONFLICT',
        jsonb_build_object('key', v_bad.key, 'currentVersion', v_bad.current));
    end if;

    if 'delete' = any(v_types) then
      delete from queen_streams.state s
       where s.query_id = p_qid and s.partition_id = p_pid
         and s.key = any(array(select o.key from unnest(v_keys, v_types) as o(key, type) where o.type = 'delete') collate "C");
    end if;
    -- A version per op in op order (a delete's goes unused).
    v_versions := array(select nextval('queen_streams.state_version_seq') from generate_series(1, cardinality(v_keys)));
    insert into queen_streams.state as s (query_id, partition_id, key, value, version, updated_at)
    select p_qid, p_pid, o.key, coalesce(o.value, 'null'::jsonb), o.version, now()
      from unnest(v_keys, v_types, v_values, v_versions) as o(key, type, value, version)
     where o.type = 'upsert'
    on conflict (query_id, partition_id, key)
    do update set value = excluded.value, version = excluded.version, updated_at = excluded.updated_at;
    select jsonb_agg(jsonb_build_object('key', o.key, 'type', o.type, 'version', case when o.type = 'upsert' then o.version end) order by o.n)
      into v_results
      from unnest(v_keys, v_types, v_versions) with ordinality as o(key, type, version, n);
    return jsonb_build_object('applied', cardinality(v_keys), 'results', v_results);
  end if;

  for v_op in select e from jsonb_array_elements(p_ops) e loop
    v_key := v_op->>'key';
    v_expected := (v_op->>'expected_version')::bigint;
    select s.version into v_current from queen_streams.state s
     where s.query_id = p_qid and s.partition_id = p_pid and s.key = v_key collate "C"
       for update;
    if not found then v_current := null; end if;
    if v_expected is not null and (
         coalesce(v_current, 0) <> v_expected
         -- a delete with expected_version fails when the row is gone
         or (v_op->>'type' = 'delete' and v_current is null)) then
      perform queen_streams.fail_v2('VERSION_CONFLICT',
        jsonb_build_object('key', v_key, 'currentVersion', coalesce(v_current, 0)));
    end if;
    if v_op->>'type' = 'upsert' then
      v_version := nextval('queen_streams.state_version_seq');
      insert into queen_streams.state as s (query_id, partition_id, key, value, version, updated_at)
      values (p_qid, p_pid, v_key, coalesce(v_op->'value', 'null'::jsonb), v_version, now())
      on conflict (query_id, partition_id, key)
      do update set value = excluded.value, version = excluded.version, updated_at = excluded.updated_at;
      v_results := v_results || jsonb_build_array(jsonb_build_object('key', v_key, 'type', 'upsert', 'version', v_version));
    else
      delete from queen_streams.state s where s.query_id = p_qid and s.partition_id = p_pid and s.key = v_key collate "C";
      v_results := v_results || jsonb_build_array(jsonb_build_object('key', v_key, 'type', 'delete', 'version', null));
    end if;
    v_applied := v_applied + 1;
  end loop;
  return jsonb_build_object('applied', v_applied, 'results', v_results);
end
$$;
