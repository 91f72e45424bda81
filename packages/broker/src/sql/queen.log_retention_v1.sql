-- The whole pass in one call, for raw callers: the broker itself runs
-- log_retention_partition_v1 per partition in transactions of its own.
create or replace function queen.log_retention_v1() returns jsonb
language plpgsql as $$
declare
  v_id   uuid;
  v_r    jsonb;
  v_segs bigint := 0;
  v_msgs bigint := 0;
begin
  for v_id in select * from queen.log_retention_candidates_v1() loop
    loop
      v_r := queen.log_retention_partition_v1(v_id, 2147483647);
      v_segs := v_segs + (v_r->>'segmentsDropped')::bigint;
      v_msgs := v_msgs + (v_r->>'messagesDropped')::bigint;
      exit when not (v_r->>'more')::boolean;
    end loop;
  end loop;
  return jsonb_build_object('segmentsDropped', v_segs, 'messagesDropped', v_msgs);
end
$$;
