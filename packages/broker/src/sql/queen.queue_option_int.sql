create or replace function queen.queue_option_int(p_options jsonb, p_name text, p_default int) returns int
language sql immutable as $$
  select coalesce((p_options->>p_name)::int, p_default)
$$;
