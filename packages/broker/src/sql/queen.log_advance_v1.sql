-- Advancing by K (PROTOCOL §3.3): the K-th retained offset after p_from,
-- walking the real segment ranges so offsets removed by retention are skipped,
-- never counted. Null when fewer than K retained messages follow p_from.
create or replace function queen.log_advance_v1(p_partition_id uuid, p_from bigint, p_k bigint) returns bigint
language plpgsql stable set enable_seqscan = off as $$
declare
  v_seg       record;
  v_remaining bigint := p_k;
  v_start     bigint;
  v_span      bigint;
begin
  if p_k < 1 then return null; end if;
  for v_seg in
    select first_offset, last_offset from queen.log_segments
     where partition_id = p_partition_id and last_offset > p_from
     order by first_offset
  loop
    v_start := greatest(v_seg.first_offset, p_from + 1);
    v_span  := v_seg.last_offset - v_start + 1;
    if v_span >= v_remaining then
      return v_start + v_remaining - 1;
    end if;
    v_remaining := v_remaining - v_span;
  end loop;
  return null;
end
$$;
