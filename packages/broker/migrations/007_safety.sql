-- Safety (issue 13): the encryption key check, a byte bound on pops, a way
-- for the broker to hand back claimed messages it could not deliver, and
-- retention that keeps unread messages of every subscribed group and stream
-- query, run one partition (and a few segments) per transaction.

-- One row: the HMAC of a fixed text under QUEEN_ENCRYPTION_KEY, stored by the
-- first broker with a key. A broker whose key gives another value refuses to
-- start (encryption.ts checkEncryptionKey), so replicas never disagree on keys.
create table queen.encryption_key_check (
  id         boolean primary key default true check (id),
  kcv        text not null,
  created_at timestamptz not null default now()
);

-- Pop with a byte bound (QUEEN_MAX_POP_BYTES): as log_pop_v2, and when
-- p_max_bytes is set each partition claims only the prefix of its batch
-- whose estimated answer size fits the bytes left, so the lease covers
-- exactly what is delivered and the rest stays available. The estimate is
-- an upper bound of the JSON the broker sends per message: the payload's
-- jsonb text (which has more spaces than JSON.stringify) or its ciphertext
-- length, plus the envelope's fields and names.
create function queen.log_pop_v3(
  p_queue_id uuid, p_partition_id uuid, p_group text, p_batch int, p_max_partitions int,
  p_auto_ack boolean, p_lease_id uuid, p_sub_mode text default 'all', p_sub_start timestamptz default null,
  p_max_bytes bigint default null
) returns table (
  partition_id uuid, partition_name text, msg_offset bigint, id uuid, transaction_id text, trace_id uuid,
  payload jsonb, encrypted bytea, producer_sub text, created_at text, retry_count int, lease_expired int
)
language plpgsql as $$
#variable_conflict use_column
declare
  v_options     jsonb;
  v_lease_s     int;
  v_delay_s     int;
  v_buffer_s    int;
  v_retry_limit int;
  v_expiry_fail boolean;
  v_remaining   int := p_batch;
  v_claimed     int := 0;
  v_cand        record;
  v_cur         queen.cursors%rowtype;
  v_from        bigint;
  v_head_msg    bigint;
  v_count       int;
  v_last        bigint;
  v_charged     int;
  v_expired     int := 0;
  v_bytes_left  bigint := p_max_bytes;
  v_bytes       bigint;
  v_compressed  boolean;
  v_envelope    int;
begin
  -- A null queue (unknown queue or partition, or pops paused: see popOnce) claims nothing.
  if p_queue_id is null then return; end if;
  select q.options into v_options from queen.queues q where q.id = p_queue_id;
  v_lease_s     := queen.queue_option_int(v_options, 'leaseTime', 300);
  if v_lease_s = 0 then v_lease_s := 60; end if;
  v_delay_s     := queen.queue_option_int(v_options, 'delayedProcessing', 0);
  v_buffer_s    := queen.queue_option_int(v_options, 'windowBuffer', 0);
  v_retry_limit := queen.queue_option_int(v_options, 'retryLimit', 3);
  v_expiry_fail := coalesce((v_options->>'leaseExpiryCountsAsFailure')::boolean, false);
  -- What one message costs in the answer besides its payload: the fields of
  -- PoppedMessage (ids, times, offsets: under 320 bytes) and the names it repeats.
  v_envelope    := 384 + octet_length(p_group) + (select octet_length(q.name) from queen.queues q where q.id = p_queue_id);

  -- A named group's start is fixed at its first pop on the queue (PROTOCOL §3.6).
  if p_group <> '__QUEUE_MODE__' then
    insert into queen.subscriptions (consumer_group, queue_id, mode, start_at)
    values (p_group, p_queue_id, coalesce(p_sub_mode, 'all'), p_sub_start)
    on conflict do nothing;
  end if;

  -- Missing cursor rows first, ascending, before any cursor is claimed: an
  -- insert that waits on another transaction's uncommitted insert of the
  -- same row while this one holds claimed cursors could deadlock with an
  -- ack that creates cursors and then locks them ascending (PROTOCOL §4).
  insert into queen.cursors (partition_id, consumer_group, cursor_offset)
  select p.id, p_group, queen.log_cursor_start_v1(p.id, p_group)
    from queen.partitions p
   where p.queue_id = p_queue_id
     and (p_partition_id is null or p.id = p_partition_id)
     and p.head_offset > 0
     and not exists (select 1 from queen.cursors c where c.partition_id = p.id and c.consumer_group = p_group)
   order by p.id
  on conflict do nothing;

  for v_cand in
    select p.id, p.name, p.first_offset
      from queen.partitions p
      left join queen.cursors c on c.partition_id = p.id and c.consumer_group = p_group
     where p.queue_id = p_queue_id
       and (p_partition_id is null or p.id = p_partition_id)
       and p.head_offset > greatest(coalesce(c.cursor_offset, 0), p.first_offset - 1)
       and (c.lease_id is null or c.lease_expires_at <= now())
       and (v_buffer_s = 0 or p.last_created_at <= now() - make_interval(secs => v_buffer_s))
     order by (select m.created_at from queen.messages m
                where m.partition_id = p.id
                  and m.msg_offset > greatest(coalesce(c.cursor_offset, 0), p.first_offset - 1)
                order by m.msg_offset limit 1) nulls last, p.id
  loop
    exit when v_remaining <= 0 or v_claimed >= p_max_partitions or v_bytes_left <= 0;

    select * into v_cur from queen.cursors c
     where c.partition_id = v_cand.id and c.consumer_group = p_group
       for update skip locked;
    continue when not found;
    continue when v_cur.lease_id is not null and v_cur.lease_expires_at > now();

    if v_cur.lease_id is not null then
      -- Lazy expiry. By default an expired lease just returns its messages
      -- uncharged (that is how a stream gate defers); a queue may ask for the
      -- head message to be charged one failed delivery (PROTOCOL §3.5).
      v_head_msg := queen.log_advance_v1(v_cand.id, v_cur.cursor_offset, 1);
      if v_expiry_fail and v_head_msg is not null and v_head_msg <= v_cur.lease_last_offset then
        v_charged := queen.log_charge_failure_v1(v_cand.id, p_group, v_head_msg);
        if v_charged > v_retry_limit then
          perform queen.log_dead_letter_v1(v_cand.id, p_group, v_head_msg, 'Lease expired; retries exhausted', v_charged);
          update queen.cursors c set cursor_offset = v_head_msg where c.partition_id = v_cand.id and c.consumer_group = p_group;
          delete from queen.failures f where f.partition_id = v_cand.id and f.consumer_group = p_group and f.msg_offset <= v_head_msg;
          v_cur.cursor_offset := v_head_msg;
        end if;
      end if;
      perform queen.log_release_lease_v1(v_cand.id, p_group);
      v_expired := v_expired + 1;
    end if;

    v_from := greatest(v_cur.cursor_offset, v_cand.first_offset - 1);
    if p_max_bytes is null then
      select count(*), max(s.msg_offset) into v_count, v_last from (
        select m.msg_offset from queen.messages m
         where m.partition_id = v_cand.id and m.msg_offset > v_from
           and (v_delay_s = 0 or m.created_at <= now() - make_interval(secs => v_delay_s))
         order by m.msg_offset limit v_remaining) s;
    else
      -- QUEEN_MAX_POP_BYTES: claim (and so lease) only the prefix whose
      -- answer fits what is left of the budget; the very first message of a
      -- pop always goes, so a message larger than the bound still moves.
      -- First a cheap upper bound that reads no payload: an uncompressed
      -- jsonb's text is at most 6 times its stored size (\u escapes are the
      -- worst case). Only when that does not fit, or a payload is
      -- compressed, is each payload's text length computed.
      select count(*), max(s.msg_offset), coalesce(sum(s.est), 0), coalesce(bool_or(s.compressed), false)
        into v_count, v_last, v_bytes, v_compressed from (
        select m.msg_offset,
               6 * coalesce(pg_column_size(m.payload), 4) + coalesce(octet_length(m.encrypted), 0)
                 + octet_length(v_cand.name) + coalesce(octet_length(m.transaction_id), 36) + coalesce(octet_length(m.producer_sub), 4) + v_envelope as est,
               pg_column_compression(m.payload) is not null as compressed
          from queen.messages m
         where m.partition_id = v_cand.id and m.msg_offset > v_from
           and (v_delay_s = 0 or m.created_at <= now() - make_interval(secs => v_delay_s))
         order by m.msg_offset limit v_remaining) s;
      if v_compressed or v_bytes > v_bytes_left then
      select count(*), max(s.msg_offset), coalesce(max(s.cum), 0) into v_count, v_last, v_bytes from (
        select m.msg_offset,
               sum(coalesce(octet_length(m.payload::text), 4) + coalesce(octet_length(m.encrypted), 0)
                   + octet_length(v_cand.name) + coalesce(octet_length(m.transaction_id), 36) + coalesce(octet_length(m.producer_sub), 4) + v_envelope)
                 over (order by m.msg_offset rows between unbounded preceding and current row) as cum,
               row_number() over (order by m.msg_offset) as rn
          from (select * from queen.messages m
                 where m.partition_id = v_cand.id and m.msg_offset > v_from
                   and (v_delay_s = 0 or m.created_at <= now() - make_interval(secs => v_delay_s))
                 order by m.msg_offset limit v_remaining) m) s
       where s.cum <= v_bytes_left or (s.rn = 1 and v_claimed = 0);
      end if;
    end if;
    continue when v_count = 0;

    if p_auto_ack then
      perform queen.log_move_cursor_v1(v_cand.id, p_group, v_last);
      update queen.cursors c set last_consumed_at = now() where c.partition_id = v_cand.id and c.consumer_group = p_group;
    else
      update queen.cursors c
         set lease_id = p_lease_id, lease_expires_at = now() + make_interval(secs => v_lease_s),
             lease_last_offset = v_last, last_consumed_at = now()
       where c.partition_id = v_cand.id and c.consumer_group = p_group;
    end if;

    return query
      select m.partition_id, v_cand.name, m.msg_offset, m.id, coalesce(m.transaction_id, m.id::text), m.trace_id, m.payload, m.encrypted,
             m.producer_sub, queen.iso(m.created_at), coalesce(f.retry_count, 0), 0
        from queen.messages m
        left join queen.failures f on f.partition_id = m.partition_id and f.consumer_group = p_group and f.msg_offset = m.msg_offset
       where m.partition_id = v_cand.id and m.msg_offset > v_from and m.msg_offset <= v_last
       order by m.msg_offset;

    v_remaining := v_remaining - v_count;
    v_claimed   := v_claimed + 1;
    if p_max_bytes is not null then v_bytes_left := v_bytes_left - v_bytes; end if;
  end loop;
  -- The count of expired leases this call released, on one trailing row
  -- with no message, so the caller counts them without another round trip.
  if v_expired > 0 then
    return query select null::uuid, null::text, null::bigint, null::uuid, null::text, null::uuid,
                        null::jsonb, null::bytea, null::text, null::text, null::int, v_expired;
  end if;
end
$$;

-- v2 keeps its signature for raw callers (log_pop_v1, benches): no byte bound.
create or replace function queen.log_pop_v2(
  p_queue_id uuid, p_partition_id uuid, p_group text, p_batch int, p_max_partitions int,
  p_auto_ack boolean, p_lease_id uuid, p_sub_mode text default 'all', p_sub_start timestamptz default null
) returns table (
  partition_id uuid, partition_name text, msg_offset bigint, id uuid, transaction_id text, trace_id uuid,
  payload jsonb, encrypted bytea, producer_sub text, created_at text, retry_count int, lease_expired int
)
language sql as $$
  select * from queen.log_pop_v3(p_queue_id, p_partition_id, p_group, p_batch, p_max_partitions,
                                 p_auto_ack, p_lease_id, p_sub_mode, p_sub_start, null)
$$;

-- Hands back the tail of what a pop claimed but the broker would not deliver
-- (an encrypted payload it cannot decrypt: encryption never answers data
-- null). p_items: [{partitionId, from, last}], `from` the first offset not
-- delivered, `last` the last one claimed. A lease shrinks to end before
-- `from` (or is released when nothing of it was delivered), charging no
-- failure; an autoAck pop's cursor goes back to `from - 1` if it still
-- stands where that pop left it. Cursor rows ascending (PROTOCOL §4).
-- Answers how many partitions were handed back.
create function queen.log_pop_return_v1(p_group text, p_lease_id uuid, p_auto_ack boolean, p_items jsonb) returns int
language plpgsql as $$
declare
  v_item record;
  v_n    int;
  v_done int := 0;
begin
  for v_item in
    select (e->>'partitionId')::uuid as pid, (e->>'from')::bigint as from_offset, (e->>'last')::bigint as last_offset
      from jsonb_array_elements(p_items) e
     order by 1
  loop
    perform 1 from queen.cursors c where c.partition_id = v_item.pid and c.consumer_group = p_group for update;
    if p_auto_ack then
      update queen.cursors c set cursor_offset = v_item.from_offset - 1
       where c.partition_id = v_item.pid and c.consumer_group = p_group
         and c.cursor_offset = v_item.last_offset and c.lease_id is null;
    else
      update queen.cursors c
         set lease_last_offset = case when v_item.from_offset - 1 > c.cursor_offset then v_item.from_offset - 1 end,
             lease_id          = case when v_item.from_offset - 1 > c.cursor_offset then c.lease_id end,
             lease_expires_at  = case when v_item.from_offset - 1 > c.cursor_offset then c.lease_expires_at end
       where c.partition_id = v_item.pid and c.consumer_group = p_group and c.lease_id = p_lease_id;
    end if;
    get diagnostics v_n = row_count;
    v_done := v_done + v_n;
  end loop;
  return v_done;
end
$$;

-- The offset up to which every reader of a partition has consumed, for the
-- completed-retention rule: the least of the cursors on it and, for each
-- subscribed group and each stream query of the queue (default group
-- `streams.<name>`) without a cursor row there, the offset its cursor would
-- start at (its subscription start; 0 = from the beginning). Null = nobody
-- reads the queue, so nothing counts as completed.
create function queen.log_consumed_upto_v1(p_partition_id uuid) returns bigint
language plpgsql stable as $$
declare
  v_queue_id uuid;
  v_queue    text;
  v_streams  boolean := to_regclass('queen_streams.queries') is not null;
  v_min      bigint;
  v_groups   text[];
begin
  select p.queue_id, q.name into v_queue_id, v_queue
    from queen.partitions p join queen.queues q on q.id = p.queue_id where p.id = p_partition_id;
  select min(c.cursor_offset) into v_min from queen.cursors c where c.partition_id = p_partition_id;
  select coalesce(array_agg(s.consumer_group), '{}') into v_groups
    from queen.subscriptions s where s.queue_id = v_queue_id;
  if v_streams then
    execute 'select $1 || coalesce(array_agg(''streams.'' || q.name), ''{}'') from queen_streams.queries q where q.source_queue = $2'
       into v_groups using v_groups, v_queue;
  end if;
  select least(v_min, min(queen.log_cursor_start_v1(p_partition_id, g.name))) into v_min
    from unnest(v_groups) g(name)
   where not exists (select 1 from queen.cursors c where c.partition_id = p_partition_id and c.consumer_group = g.name);
  return v_min;
end
$$;

-- Retention (PROTOCOL §3.9) of ONE partition, at most p_max_segments whole
-- segments, in the caller's (short) transaction: the partition row is locked
-- (rank 4) only while those few segments go, so pushes to it wait at most
-- that long and pushes elsewhere never. The broker calls it per partition
-- until `more` is false. Rules as log_retention_v1's, except that the
-- completed rule counts every reader (log_consumed_upto_v1).
create function queen.log_retention_partition_v1(p_partition_id uuid, p_max_segments int) returns jsonb
language plpgsql as $$
declare
  v_part   record;
  v_bound  bigint;
  v_cap    bigint;
  v_upto   bigint;
  v_segs   bigint;
  v_msgs   bigint;
begin
  select p.id,
         coalesce((q.options->>'retentionEnabled')::boolean, false) as enabled,
         coalesce((q.options->>'retentionSeconds')::bigint, 0) as ret_s,
         coalesce((q.options->>'completedRetentionSeconds')::bigint, 0) as done_s,
         coalesce((q.options->>'maxWaitTimeSeconds')::bigint, 0) as wait_s
    into v_part
    from queen.partitions p join queen.queues q on q.id = p.queue_id
   where p.id = p_partition_id
     for update of p;
  if not found then return jsonb_build_object('segmentsDropped', 0, 'messagesDropped', 0, 'more', false); end if;

  if v_part.enabled and v_part.done_s > 0 then v_upto := queen.log_consumed_upto_v1(p_partition_id); end if;
  select max(s.last_offset) into v_bound
    from queen.log_segments s
   where s.partition_id = p_partition_id
     and ((v_part.enabled and v_part.ret_s > 0 and s.last_created_at < now() - make_interval(secs => v_part.ret_s))
       or (v_part.enabled and v_part.done_s > 0 and s.last_created_at < now() - make_interval(secs => v_part.done_s)
           and s.last_offset <= v_upto)
       or (v_part.wait_s > 0 and s.last_created_at < now() - make_interval(secs => v_part.wait_s)));
  if v_bound is null then return jsonb_build_object('segmentsDropped', 0, 'messagesDropped', 0, 'more', false); end if;
  -- At most p_max_segments segments this call.
  select max(s.last_offset) into v_cap from (
    select s.last_offset from queen.log_segments s
     where s.partition_id = p_partition_id and s.first_offset <= v_bound
     order by s.first_offset limit p_max_segments) s;
  v_cap := least(v_bound, coalesce(v_cap, v_bound));

  delete from queen.messages m where m.partition_id = p_partition_id and m.msg_offset <= v_cap;
  get diagnostics v_msgs = row_count;
  delete from queen.log_segments s where s.partition_id = p_partition_id and s.first_offset <= v_cap;
  get diagnostics v_segs = row_count;
  -- DLQ entries and failure records live as long as their message.
  delete from queen.dlq d where d.partition_id = p_partition_id and d.msg_offset <= v_cap;
  delete from queen.failures f where f.partition_id = p_partition_id and f.msg_offset <= v_cap;
  update queen.partitions p
     set first_offset = greatest(p.first_offset, v_cap + 1),
         segment_first = case when p.segment_first <= v_cap then null else p.segment_first end,
         segment_started_at = case when p.segment_first <= v_cap then null else p.segment_started_at end
   where p.id = p_partition_id;
  return jsonb_build_object('segmentsDropped', v_segs, 'messagesDropped', v_msgs, 'more', v_cap < v_bound);
end
$$;

-- The partitions a retention pass visits, ascending.
create function queen.log_retention_candidates_v1() returns setof uuid
language sql stable as $$
  select p.id
    from queen.partitions p join queen.queues q on q.id = p.queue_id
   where ((coalesce((q.options->>'retentionEnabled')::boolean, false)
           and (coalesce((q.options->>'retentionSeconds')::bigint, 0) > 0
                or coalesce((q.options->>'completedRetentionSeconds')::bigint, 0) > 0))
          or coalesce((q.options->>'maxWaitTimeSeconds')::bigint, 0) > 0)
     and p.head_offset >= p.first_offset
   order by p.id
$$;

-- The whole pass in one call, for raw callers: the broker itself runs
-- log_retention_partition_v1 per partition in transactions of its own.
create or replace function queen.log_retention_v1() returns jsonb
language plpgsql as $$
declare
  v_id   uuid;
  v_r    jsonb;
  v_segs bigint := 0;
  v_msgs bigint := 0;
begin
  for v_id in select * from queen.log_retention_candidates_v1() loop
    loop
      v_r := queen.log_retention_partition_v1(v_id, 2147483647);
      v_segs := v_segs + (v_r->>'segmentsDropped')::bigint;
      v_msgs := v_msgs + (v_r->>'messagesDropped')::bigint;
      exit when not (v_r->>'more')::boolean;
    end loop;
  end loop;
  return jsonb_build_object('segmentsDropped', v_segs, 'messagesDropped', v_msgs);
end
$$;

-- Timers never downgrade encryption either: a timer scheduled with a
-- plaintext payload for a queue that has encryptionEnabled by the time it is
-- due is held (not fired, not claimed) and counted in `held`; a broker with
-- QUEEN_ENCRYPTION_KEY encrypts its payload in place (timers.ts) and it fires
-- on the next poll. As 005's firer otherwise.
create function queen.timer_held_v1(p_queue text, p_encrypted bytea) returns boolean
language sql stable as $$
  select p_encrypted is null
     and coalesce((select (q.options->>'encryptionEnabled')::boolean from queen.queues q where q.name = p_queue), false)
$$;

create or replace function queen.log_timers_fire_v1(p_limit int) returns jsonb
language plpgsql as $$
declare
  v_ids     uuid[];
  v_locked  uuid[];
  v_t       record;
  v_fired   int := 0;
  v_missing int := 0;
  v_queues  text[] := '{}';
  v_held    int;
begin
  select coalesce(array_agg(s.id order by s.fire_at, s.id), '{}') into v_ids
    from (select t.id, t.fire_at from queen.log_timers t
           where t.fire_at <= clock_timestamp()
             and not queen.timer_held_v1(t.queue_name, t.encrypted)
           order by t.fire_at, t.id
           limit p_limit
             for update skip locked) s;
  -- Plaintext timers of queues that are encrypted now wait for a broker with
  -- the key to encrypt them (the caller does, when it holds one).
  select count(*) into v_held from (
    select 1 from queen.log_timers t
     where t.fire_at <= clock_timestamp() and queen.timer_held_v1(t.queue_name, t.encrypted)
     limit 1000) s;
  if cardinality(v_ids) = 0 then
    return jsonb_build_object('fired', 0, 'missing', 0, 'queues', '[]'::jsonb, 'held', v_held);
  end if;

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
    perform queen.log_push_one_v1(v_t.partition_id, v_t.payload, coalesce(v_t.transaction_id, 'timer:' || v_t.id::text),
                                  null, v_t.producer_sub, v_t.encrypted is not null, v_t.encrypted);
    delete from queen.log_timers where id = v_t.id;
    v_fired := v_fired + 1;
    if not (v_t.queue_name = any(v_queues)) then v_queues := array_append(v_queues, v_t.queue_name); end if;
  end loop;
  return jsonb_build_object('fired', v_fired, 'missing', v_missing, 'queues', to_jsonb(v_queues), 'held', v_held);
end
$$;

