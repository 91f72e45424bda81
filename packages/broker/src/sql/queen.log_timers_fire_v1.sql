-- Fires due timers, oldest first. A timer whose queue has a maxSize fires
-- only into room (queen.log_queue_room_v1.sql): the rows of its bounded target
-- queues are locked and counted after the timer rows (rank 2) and before the
-- append locks (rank 4), and a timer for which no room is left stays due and
-- for a later pass (counted in `waiting`), neither dropped nor
-- fired twice. Timers of a queue already full are not claimed at all, so
-- they never hold back the timers of other queues.
create or replace function queen.log_timers_fire_v1(p_limit int) returns jsonb
language plpgsql as $$
declare
  v_ids     uuid[];
  v_locked  uuid[];
  v_t       record;
  v_fired   int := 0;
  v_missing int := 0;
  v_queues  text[] := '{}';
  v_written uuid[] := '{}';
  v_held    int;
  v_room    jsonb := '{}'::jsonb;
  v_waiting int := 0;
begin
  select coalesce(array_agg(s.id order by s.fire_at, s.id), '{}') into v_ids
    from (select t.id, t.fire_at from queen.log_timers t
           where t.fire_at <= clock_timestamp()
             and not queen.timer_held_v1(t.queue_name, t.encrypted)
             and not exists (select 1 from queen.queues q
                              where q.name = t.queue_name and coalesce((q.options->>'maxSize')::bigint, 0) > 0
                                and queen.log_queue_pending_v1(q.id) >= (q.options->>'maxSize')::bigint)
           order by t.fire_at, t.id
           limit p_limit
             for update skip locked) s;
  -- Plaintext timers of queues that are encrypted now wait for a broker with
  -- the key to encrypt them (the caller does, when it holds one).
  select count(*) into v_held from (
    select 1 from queen.log_timers t
     where t.fire_at <= clock_timestamp() and queen.timer_held_v1(t.queue_name, t.encrypted)
     limit 1000) s;
  -- Due timers of queues with no room left (not claimed above): they wait.
  select count(*) into v_waiting from (
    select 1 from queen.log_timers t
     where t.fire_at <= clock_timestamp() and not (t.id = any(v_ids))
       and exists (select 1 from queen.queues q
                    where q.name = t.queue_name and coalesce((q.options->>'maxSize')::bigint, 0) > 0
                      and queen.log_queue_pending_v1(q.id) >= (q.options->>'maxSize')::bigint)
     limit 1000) s;
  if cardinality(v_ids) = 0 then
    return jsonb_build_object('fired', 0, 'missing', 0, 'queues', '[]'::jsonb, 'partitions', '[]'::jsonb, 'held', v_held, 'waiting', v_waiting);
  end if;

  -- The room of every bounded target, its row locked until the commit: {queue: room}.
  select coalesce(jsonb_object_agg(r.queue, greatest(r.max_size - r.pending, 0)), '{}'::jsonb) into v_room
    from queen.log_queue_room_v1(array(select distinct t.queue_name from queen.log_timers t where t.id = any(v_ids))) r;

  -- Rank 4: every target's append lock, ascending id, before the first push.
  select coalesce(array_agg(s.id), '{}') into v_locked
    from (select p.id from queen.partitions p
           where p.id in (select p2.id from queen.log_timers t
                            join queen.queues q on q.name = t.queue_name
                            join queen.partitions p2 on p2.queue_id = q.id and p2.name = t.partition_name
                           where t.id = any(v_ids))
           order by p.id
             for update) s;

  for v_t in
    select t.id, t.queue_name, t.payload, t.encrypted, t.transaction_id, t.producer_sub, p.id as partition_id
      from queen.log_timers t
      left join (queen.queues q join queen.partitions p on p.queue_id = q.id)
        on q.name = t.queue_name and p.name = t.partition_name
     where t.id = any(v_ids)
     order by t.fire_at, t.id
  loop
    if v_t.partition_id is null or not (v_t.partition_id = any(v_locked)) then
      v_missing := v_missing + 1;
      continue;
    end if;
    if v_room ? v_t.queue_name then
      if (v_room->>v_t.queue_name)::bigint <= 0 then
        v_waiting := v_waiting + 1;
        continue;
      end if;
      v_room := jsonb_set(v_room, array[v_t.queue_name], to_jsonb((v_room->>v_t.queue_name)::bigint - 1));
    end if;
    perform queen.log_push_one_v1(v_t.partition_id, v_t.payload, coalesce(v_t.transaction_id, 'timer:' || v_t.id::text),
                                  null, v_t.producer_sub, v_t.encrypted is not null, v_t.encrypted);
    delete from queen.log_timers where id = v_t.id;
    v_fired := v_fired + 1;
    if not (v_t.queue_name = any(v_queues)) then v_queues := array_append(v_queues, v_t.queue_name); end if;
    if not (v_t.partition_id = any(v_written)) then v_written := array_append(v_written, v_t.partition_id); end if;
  end loop;
  return jsonb_build_object('fired', v_fired, 'missing', v_missing, 'queues', to_jsonb(v_queues), 'partitions', to_jsonb(v_written), 'held', v_held, 'waiting', v_waiting);
end
$$;
