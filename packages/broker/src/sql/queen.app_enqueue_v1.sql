-- Writes from an application's own transaction (@queen-mq/pg, issue 32).
-- An application connected to the broker's database calls these inside its
-- own BEGIN ... COMMIT, beside its own writes: the message, or the ack, then
-- commits with them or not at all. Both go through the functions every
-- other write goes through; nothing here restates them.
--
-- Appends items, in the caller's transaction. p_items: [{queue, partition,
-- payload, transaction_id?, trace_id?, traceparent?}] in input order; one
-- row per item back, in input order (as queen.log_push_many_v1).
--   * An encryptionEnabled queue is refused (QUEUE_ENCRYPTED): its payloads
--     are encrypted with the broker's key, which never leaves the broker.
--   * A queue with maxSize > 0 takes the items only while its pending
--     messages stay within it (queen.log_queue_room_v1.sql, the rule of every
--     write path): otherwise QUEUE_FULL is raised, nothing is appended and
--     the caller's transaction is aborted. The queue's row lock is held until
--     the caller commits, so writers of that queue wait for this transaction.
--   * Queues and partitions are created as a push creates them
--     (queen.ensure_partitions_v1), but inside this transaction: a rollback
--     takes them back too, and a concurrent push to a partition created here
--     waits for the commit (it would wait for the append lock anyway).
--   * Offsets, deduplication by transactionId and the order of items come
--     from the allocator (queen.log_push_many_v1 -> queen.log_append_v1):
--     the append lock of each partition is held until the caller commits,
--     so a push over HTTP to the same partition waits and takes the offsets
--     after this transaction's, gapless, in commit order.
--   * Parked pops are woken by a NOTIFY on the brokers' channel for every
--     queue that got a new message. PostgreSQL delivers a NOTIFY when its
--     transaction commits and drops it on a rollback: pops wake at the
--     commit, never before, and never for a write that was undone. (The
--     broker's own pushes publish after their commit instead, see
--     notifier.ts: a notifying commit serialises on a global lock; here the
--     application's commit pays that, never the broker's hot path.)
--   * The partitions written are announced on channel queen_totals (ids,
--     comma-separated, 200 a notification) for the brokers' listing totals
--     (listing-totals.ts): no route of theirs saw this write.
create or replace function queen.app_enqueue_v1(p_items jsonb)
returns table (status text, message_id uuid, "offset" bigint, partition_id uuid)
language plpgsql as $$
#variable_conflict use_column
declare
  v_encrypted text[];
  v_items     jsonb;
  v_pids      uuid[];
  v_status    text[];
  v_ids       uuid[];
  v_offsets   bigint[];
  v_full      record;
begin
  select array_agg(q.name order by q.name) into v_encrypted
    from queen.queues q
   where q.name in (select e->>'queue' from jsonb_array_elements(p_items) e)
     and coalesce((q.options->>'encryptionEnabled')::boolean, false);
  if v_encrypted is not null then
    raise exception using errcode = 'QS001', message = 'QUEUE_ENCRYPTED', hint = jsonb_build_object('queues', v_encrypted)::text;
  end if;

  -- Before the first partition lock (a bounded queue exists: configure made it).
  select f.* into v_full
    from queen.log_queue_first_full_v1(
      (select jsonb_agg(jsonb_build_object('queue', x.queue, 'count', x.n))
         from (select e->>'queue' as queue, count(*) as n from jsonb_array_elements(p_items) e group by 1) x)) f;
  if v_full.queue is not null then
    raise exception using errcode = 'QS001', message = 'QUEUE_FULL',
      hint = jsonb_build_object('queue', v_full.queue, 'pending', v_full.pending, 'maxSize', v_full.max_size, 'count', v_full.count)::text;
  end if;

  with targets as materialized (
    select t.* from queen.ensure_partitions_v1(
      (select jsonb_agg(jsonb_build_object('queue', e->>'queue', 'partition', e->>'partition')) from jsonb_array_elements(p_items) e)) t
  )
  select jsonb_agg((x.e - 'queue' - 'partition') || jsonb_build_object('partition_id', t.partition_id) order by x.ord),
         array_agg(t.partition_id order by x.ord)
    into v_items, v_pids
    from jsonb_array_elements(p_items) with ordinality as x(e, ord)
    join targets t on t.queue_name = x.e->>'queue' and t.partition_name = x.e->>'partition';

  select array_agg(r.status order by r.n), array_agg(r.message_id order by r.n), array_agg(r."offset" order by r.n)
    into v_status, v_ids, v_offsets
    from queen.log_push_many_v1(v_items, null) with ordinality as r(status, message_id, "offset", n);

  perform pg_notify('queen_push', w.queue)
     from (select distinct x.e->>'queue' as queue
             from jsonb_array_elements(p_items) with ordinality as x(e, ord)
            where v_status[x.ord] = 'queued') w;

  perform pg_notify('queen_totals', c.ids)
     from (select string_agg(d.id::text, ',') as ids
             from (select p.id, (row_number() over (order by p.id) - 1) / 200 as chunk
                     from (select distinct u.p as id from unnest(v_pids, v_status) as u(p, s) where u.s = 'queued') p) d
            group by d.chunk) c;

  return query select u.s, u.id, u.o, u.p from unnest(v_status, v_ids, v_offsets, v_pids) as u(s, id, o, p);
end
$$;
