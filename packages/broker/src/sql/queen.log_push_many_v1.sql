create or replace function queen.log_push_many_v1(p_items jsonb, p_producer_sub text)
returns table (status text, message_id uuid, "offset" bigint)
language plpgsql set enable_seqscan = off as $$
declare
  v_pids uuid[];
  v_first uuid;
begin
  -- One partition (the usual push, a cycle's sink run) is recognised by one
  -- jsonpath pass over the request: no row per item, no sort.
  v_first := (p_items->0->>'partition_id')::uuid;
  if v_first is not null
     and not jsonb_path_exists(p_items, '$[*] ? (!exists(@.partition_id) || @.partition_id != $p)', jsonb_build_object('p', v_first)) then
    perform 1 from queen.partitions where id = v_first for update;
    return query
    select a.r_status, a.r_message_id, a.r_offset
      from queen.log_append_v1(v_first, p_items, p_producer_sub) a
     order by a.r_ord;
    return;
  end if;
  select array_agg(distinct (e->>'partition_id')::uuid) into v_pids from jsonb_array_elements(p_items) e;
  perform 1 from queen.partitions where id = any(v_pids) order by id for update;
  if cardinality(v_pids) = 1 then
    -- One partition (the usual push): the request is its run as it stands.
    return query
    select a.r_status, a.r_message_id, a.r_offset
      from queen.log_append_v1(v_pids[1], p_items, p_producer_sub) a
     order by a.r_ord;
    return;
  end if;
  -- Each partition's run is appended once; each result row goes back to its
  -- input position through the run's ords (an int8 array: O(1) subscripts,
  -- so a 10k-item request stays linear).
  return query
  with items as (
    select x.ord, (x.e->>'partition_id')::uuid as pid, x.e
      from jsonb_array_elements(p_items) with ordinality as x(e, ord)
  ),
  runs as materialized (
    select i.pid, array_agg(i.ord order by i.ord) as ords, jsonb_agg(i.e order by i.ord) as run
      from items i
     group by i.pid
  )
  select a.r_status, a.r_message_id, a.r_offset
    from runs r cross join lateral queen.log_append_v1(r.pid, r.run, p_producer_sub) a
   order by r.ords[a.r_ord];
end
$$;
