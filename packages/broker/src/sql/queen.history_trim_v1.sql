-- The maintenance pass's trim of the history (migration 032): minute rows
-- older than p_minutes_kept and hour rows older than p_hours_kept go, in
-- both tables. The block range indexes on bucket find them without reading
-- the rows that stay. Answers the rows deleted.
create or replace function queen.history_trim_v1(p_minutes_kept interval, p_hours_kept interval)
returns bigint
language plpgsql as $$
declare
  v_n bigint;
  v_total bigint := 0;
begin
  delete from queen.queue_history where bucket < now() - p_minutes_kept and step = 60;
  get diagnostics v_n = row_count; v_total := v_total + v_n;
  delete from queen.queue_history where bucket < now() - p_hours_kept and step = 3600;
  get diagnostics v_n = row_count; v_total := v_total + v_n;
  delete from queen.stream_history where bucket < now() - p_minutes_kept and step = 60;
  get diagnostics v_n = row_count; v_total := v_total + v_n;
  delete from queen.stream_history where bucket < now() - p_hours_kept and step = 3600;
  get diagnostics v_n = row_count; v_total := v_total + v_n;
  return v_total;
end;
$$;
