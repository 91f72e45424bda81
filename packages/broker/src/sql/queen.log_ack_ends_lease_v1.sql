-- Whether a cursor move to p_offset ends the lease: when `p_release` is
-- null, once the cursor reaches what the lease delivered (the ack route);
-- true always (a cycle's default, a dead-letter); false never (a gate's
-- partial ack keeps its lease running). Inlined where it is used.
create or replace function queen.log_ack_ends_lease_v1(p_release boolean, p_cursor bigint, p_lease_last bigint, p_offset bigint) returns boolean
language sql immutable parallel safe as $$
  select coalesce(p_release, p_lease_last is not null and greatest(p_cursor, p_offset) >= p_lease_last)
$$;
