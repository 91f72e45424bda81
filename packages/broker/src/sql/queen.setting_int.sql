create or replace function queen.setting_int(name text, fallback int) returns int
language sql stable as $$
  select coalesce(nullif(current_setting(name, true), '')::int, fallback)
$$;
