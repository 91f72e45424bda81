-- One broker's history flush (migration 032, metrics/history.ts): adds the
-- counts this broker gathered since its last flush to their minute rows and
-- to their hour rows, and, when the minute before this one has not been
-- sampled yet by any broker, samples the lags, depths and DLQ sizes into it.
--
-- Queue counts arrive as parallel arrays, one element per (minute, queue,
-- group) the broker counted, each key once; stream counts likewise per
-- (minute, query). Counts are added (several brokers add to one row), so a
-- flush that commits adds its counts once. The sample is taken by the broker
-- whose update of history_state moves sampled_at to that minute: an update
-- of the one row that waits for a concurrent one and then finds the minute
-- taken, so each minute is sampled once, whatever the number of brokers.
-- A sample is a set, never an add: the minute's row gets the value, the
-- hour's row the largest of its minutes.
--
-- A stream's watermark (migration 037) is the newest event-time watermark
-- a committed cycle of the query wrote (its `__wm__`, epoch ms) in the
-- bucket: the largest of what the brokers send, null where none was written.
--
-- Answers whether this call took the sample.
create or replace function queen.history_flush_v2(
  p_bucket  timestamptz[],
  p_queue   text[],
  p_group   text[],
  p_pushed  bigint[],
  p_popped  bigint[],
  p_acked   bigint[],
  p_failed  bigint[],
  p_dead    bigint[],
  s_bucket  timestamptz[],
  s_query   uuid[],
  s_cycles  bigint[],
  s_flushes bigint[],
  s_in      bigint[],
  s_emitted bigint[],
  s_late    bigint[],
  s_errors  bigint[],
  s_last    timestamptz[],
  s_wm      bigint[]
) returns boolean
language plpgsql as $$
declare
  v_minute timestamptz := date_trunc('minute', now()) - interval '1 minute';
  v_hour   timestamptz := date_trunc('hour', date_trunc('minute', now()) - interval '1 minute');
begin
  if cardinality(p_bucket) > 0 then
    insert into queen.queue_history as h (queue, consumer_group, step, bucket, pushed, popped, acked, failed, dead_lettered)
    select d.queue, d.grp, s.step, case when s.step = 60 then d.bucket else date_trunc('hour', d.bucket) end,
           sum(d.pushed), sum(d.popped), sum(d.acked), sum(d.failed), sum(d.dead)
      from unnest(p_bucket, p_queue, p_group, p_pushed, p_popped, p_acked, p_failed, p_dead)
             as d(bucket, queue, grp, pushed, popped, acked, failed, dead)
     cross join (values (60), (3600)) s(step)
     group by 1, 2, 3, 4
    on conflict (queue, consumer_group, step, bucket) do update
       set pushed = h.pushed + excluded.pushed, popped = h.popped + excluded.popped, acked = h.acked + excluded.acked,
           failed = h.failed + excluded.failed, dead_lettered = h.dead_lettered + excluded.dead_lettered;
  end if;

  if cardinality(s_bucket) > 0 then
    insert into queen.stream_history as h (query_id, step, bucket, cycles, flushes, messages_in, emitted, late, errors, last_cycle_at, watermark_ms)
    select d.query_id, s.step, case when s.step = 60 then d.bucket else date_trunc('hour', d.bucket) end,
           sum(d.cycles), sum(d.flushes), sum(d.msgs), sum(d.emitted), sum(d.late), sum(d.errors), max(d.last_at), max(d.wm)
      from unnest(s_bucket, s_query, s_cycles, s_flushes, s_in, s_emitted, s_late, s_errors, s_last, s_wm)
             as d(bucket, query_id, cycles, flushes, msgs, emitted, late, errors, last_at, wm)
     cross join (values (60), (3600)) s(step)
     group by 1, 2, 3
    on conflict (query_id, step, bucket) do update
       set cycles = h.cycles + excluded.cycles, flushes = h.flushes + excluded.flushes, messages_in = h.messages_in + excluded.messages_in,
           emitted = h.emitted + excluded.emitted, late = h.late + excluded.late, errors = h.errors + excluded.errors,
           last_cycle_at = greatest(h.last_cycle_at, excluded.last_cycle_at), watermark_ms = greatest(h.watermark_ms, excluded.watermark_ms);
  end if;

  -- The cheap read first: most flushes find the minute sampled and take no row lock.
  if (select sampled_at from queen.history_state) >= v_minute then return false; end if;
  update queen.history_state set sampled_at = v_minute where sampled_at < v_minute;
  if not found then return false; end if;

  -- Groups with a lag; queues with a depth or a DLQ; the overview row always.
  insert into queen.queue_history as h (queue, consumer_group, step, bucket, lag, dlq)
  select x.queue, x.grp, s.step, case when s.step = 60 then v_minute else v_hour end, x.lag, x.dlq
    from (
      select g.queue_name as queue, g.consumer_group as grp, g.lag, 0::bigint as dlq from queen.group_totals g where g.lag > 0
      union all
      select t.queue_name, '', t.depth, t.dlq from queen.queue_totals t where t.depth > 0 or t.dlq > 0
      union all
      select '', '', (select coalesce(sum(g.lag), 0) from queen.group_totals g)::bigint,
                     (select coalesce(sum(t.dlq), 0) from queen.queue_totals t)::bigint
    ) x
   cross join (values (60), (3600)) s(step)
  on conflict (queue, consumer_group, step, bucket) do update
     set lag = case when excluded.step = 60 then excluded.lag else greatest(h.lag, excluded.lag) end,
         dlq = case when excluded.step = 60 then excluded.dlq else greatest(h.dlq, excluded.dlq) end;

  -- A stream query's lag: its group's lag, and a source partition it has no cursor on counts whole.
  insert into queen.stream_history as h (query_id, step, bucket, lag)
  select x.query_id, s.step, case when s.step = 60 then v_minute else v_hour end, x.lag
    from (
      select q.query_id, (coalesce(g.lag, 0) + coalesce(t.retained, 0) - coalesce(g.retained, 0))::bigint as lag
        from queen_streams.queries q
        join queen.queues qu on qu.name = q.source_queue
        join queen.queue_totals t on t.queue_id = qu.id
        left join queen.group_totals g on g.queue_id = qu.id and g.consumer_group = 'streams.' || q.name
    ) x
   cross join (values (60), (3600)) s(step)
   where x.lag > 0
  on conflict (query_id, step, bucket) do update
     set lag = case when excluded.step = 60 then excluded.lag else greatest(h.lag, excluded.lag) end;
  return true;
end;
$$;
