-- Lease extend (PROTOCOL §5.6), as 002, answering codes only.
create or replace function queen.log_extend_lease_v1(p_lease_id uuid, p_seconds int) returns jsonb
language plpgsql set enable_seqscan = off as $$
declare
  v_live    int;
  v_expires timestamptz;
begin
  perform 1 from queen.cursors c where c.lease_id = p_lease_id
   order by c.partition_id, c.consumer_group for update;
  if not found then
    return jsonb_build_object('success', false, 'code', 'LEASE_NOT_FOUND');
  end if;
  with upd as (
    update queen.cursors c
       set lease_expires_at = greatest(c.lease_expires_at, now() + make_interval(secs => p_seconds))
     where c.lease_id = p_lease_id and c.lease_expires_at > now()
    returning c.lease_expires_at)
  select count(*), min(lease_expires_at) into v_live, v_expires from upd;
  if v_live = 0 then
    return jsonb_build_object('success', false, 'code', 'LEASE_EXPIRED');
  end if;
  return jsonb_build_object('success', true, 'expiresAt', queen.iso(v_expires));
end
$$;
