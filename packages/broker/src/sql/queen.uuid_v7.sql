-- UUIDv7 whose 42 bits after the timestamp carry the offset, so ids strictly
-- increase with offset inside a partition even when several share a
-- millisecond; the last 32 bits (tail) are random and keep ids of different
-- partitions apart. An append draws one tail for its whole run (the offset
-- bits already differ): gen_random_uuid() costs ~4 µs a call here, more than
-- the rest of the id.
-- Stable, not immutable: extract() from a timestamptz is stable, and a body
-- more volatile than its declaration stops the planner inlining the call
-- (a separate SQL-function execution per message).
create or replace function queen.uuid_v7(ts timestamptz, seq bigint, tail bytea) returns uuid
language sql stable parallel safe as $$
  select encode(
    substring(int8send(floor(extract(epoch from ts) * 1000)::bigint) from 3)
    || int2send((28672 | ((seq >> 30) & 4095))::int2)
    || substring(int8send(2147483648 | (seq & 1073741823)) from 5)
    || tail,
    'hex')::uuid
$$;

create or replace function queen.uuid_v7(ts timestamptz, seq bigint) returns uuid
language sql volatile as $$
  select queen.uuid_v7(ts, seq, substring(uuid_send(gen_random_uuid()) from 1 for 4))
$$;
