-- The wire time format, inlined at last: to_char is stable (it reads the
-- session's locale settings), and a SQL function declared more strictly than
-- its body is never inlined, so every popped message paid a separate
-- function execution for its createdAt (about a third of a batch-100 pop).
create or replace function queen.iso(ts timestamptz) returns text
language sql stable parallel safe as $$
  select to_char(ts at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
$$;
