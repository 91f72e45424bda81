-- The offset a message id carries, without a regex: the same answer as 001's
-- (null for anything that is not a queen.uuid_v7 text), at 0.2 µs instead of
-- ~18 µs a call. Every ack item resolves its message through this.
create or replace function queen.id_offset(p_id text) returns bigint
language sql immutable parallel safe as $$
  select case when length(p_id) = 36
               and substr(p_id, 9, 1) = '-' and substr(p_id, 14, 1) = '-' and substr(p_id, 19, 1) = '-' and substr(p_id, 24, 1) = '-'
               -- four dashes (placed above) and nothing but hex digits besides
               and translate(lower(p_id), '0123456789abcdef', '') = '----'
               and substr(p_id, 15, 1) = '7' and strpos('89abAB', substr(p_id, 20, 1)) > 0 then
    (('x' || substr(p_id, 16, 3))::bit(12)::bigint << 30)
    | ((('x' || substr(p_id, 20, 4))::bit(16)::bigint & 16383) << 16)
    | ('x' || substr(p_id, 25, 4))::bit(16)::bigint
  end
$$;
