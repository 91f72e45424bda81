-- Pop (PROTOCOL §5.4), with a count of the expired leases the call found
-- and released (queen_lease_expired_total): message rows carry 0 and, when
-- any lease expired, one trailing row with no message carries the count.
-- With a byte bound (QUEEN_MAX_POP_BYTES): when p_max_bytes is set each partition claims only the prefix of its batch
-- whose estimated answer size fits the bytes left, so the lease covers
-- exactly what is delivered and the rest stays available. The estimate is
-- an upper bound of the JSON the broker sends per message: the payload's
-- jsonb text (which has more spaces than JSON.stringify) or its ciphertext
-- length, plus the envelope's fields and names.
-- A pop of one partition finds its cursor row and its candidate by the
-- partition's id (issue 31).
-- A partition whose retry delay runs for the group (queen.cursors.retry_at:
-- a failed ack on a queue with retryDelay, issue 32) is no candidate until
-- it passes; the failed message is then the first one claimed.
-- Claim order of a wildcard pop (the queue's claimOrder, docs/protocol.md):
-- 'fair' (the default) serves the pending partitions in turn, round robin
-- over their ids from just after p_after, the partition the caller's pops
-- of the queue for the group last reached in that round; before them, the
-- partitions of p_again, those the caller owes more turns for their weight
-- (partitionWeights, queen.partition_weight_v1, answered on every row). A
-- partition that turns pending so waits at most one turn of each other
-- busy partition, not for their backlog. 'oldest' serves the oldest pending
-- message first. The round is kept by the caller (claim-turns.ts), not
-- written here: a claim writes nothing a push waits for.
-- A group the queue names in conflatedGroups gets, of each partition it
-- claims, only the newest message; the lease covers every message behind
-- it, so acking that one message moves the cursor past them all.
create or replace function queen.log_pop_v4(
  p_queue_id uuid, p_partition_id uuid, p_group text, p_batch int, p_max_partitions int,
  p_auto_ack boolean, p_lease_id uuid, p_sub_mode text default 'all', p_sub_start timestamptz default null,
  p_max_bytes bigint default null, p_after uuid default null, p_again uuid[] default null
) returns table (
  partition_id uuid, partition_name text, msg_offset bigint, id uuid, transaction_id text, trace_id uuid,
  payload jsonb, encrypted bytea, producer_sub text, created_at text, retry_count int, lease_expired int, weight int
)
language plpgsql
set enable_seqscan = off
as $$
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
  v_cands       refcursor;
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
  v_head        bigint;
  v_last_created timestamptz;
  v_first       bigint;
  v_next        record;
  v_more        boolean := false;
  v_ids         uuid[] := '{}';
  v_names       text[] := '{}';
  v_firsts      bigint[] := '{}';
  v_keys        timestamptz[] := '{}';
  v_n           int := 0;
  v_pick        int;
  v_listed      boolean := true;
  v_fair        boolean;
  v_conflate    boolean;
  v_phase       int := 1;
  v_again       int := 0;
  v_weighted    boolean;
  v_weight      int := 1;
  v_deliver     bigint;
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
  v_fair        := p_partition_id is null and coalesce(v_options->>'claimOrder', 'fair') <> 'oldest';
  v_conflate    := coalesce(v_options->'conflatedGroups' ? p_group, false);
  v_weighted    := v_fair and coalesce(v_options->'partitionWeights' <> '{}'::jsonb, false);
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
  -- A pop of one partition and a pop of the queue are separate statements,
  -- each planned for its own key: `p_partition_id is null or p.id = ...`
  -- cannot use the primary key in a cached plan, and made a pop of one
  -- partition read every partition of its queue.
  if p_partition_id is not null then
    insert into queen.cursors (partition_id, consumer_group, cursor_offset)
    select p.id, p_group, queen.log_cursor_start_v1(p.id, p_group)
      from queen.partitions p
     where p.id = p_partition_id and p.queue_id = p_queue_id
       and p.head_offset > 0
       and not exists (select 1 from queen.cursors c where c.partition_id = p.id and c.consumer_group = p_group offset 0)
    on conflict do nothing;
  elsif not exists (select 1 from queen.pending_groups g where g.queue_id = p_queue_id and g.consumer_group = p_group) then
    v_listed := queen.log_pending_start_v1(p_queue_id, p_group);
  elsif exists (select 1 from queen.pending pp where pp.queue_id = p_queue_id and pp.consumer_group = p_group and pp.needs_cursor) then
    -- Partitions a push made pending for the group before it had a cursor
    -- row there (new partitions, mostly).
    insert into queen.cursors (partition_id, consumer_group, cursor_offset)
    select pp.partition_id, p_group, queen.log_cursor_start_v1(pp.partition_id, p_group)
      from queen.pending pp
     where pp.queue_id = p_queue_id and pp.consumer_group = p_group and pp.needs_cursor
     order by pp.partition_id
    on conflict do nothing;
    -- Skip locked: a push holding one of these rows may wait for this pop
    -- (another of its rows), so this pop must not wait for it; a row left
    -- flagged is seen to by the next pop.
    update queen.pending pp set needs_cursor = false
     where pp.ctid in (select x.ctid from queen.pending x
                        where x.queue_id = p_queue_id and x.consumer_group = p_group and x.needs_cursor
                          and exists (select 1 from queen.cursors c where c.partition_id = x.partition_id and c.consumer_group = p_group)
                          for update skip locked);
  end if;

  if p_partition_id is not null then
    open v_cands for
      select p.id, p.name, p.first_offset
        from queen.partitions p
        left join queen.cursors c on c.partition_id = p.id and c.consumer_group = p_group
       where p.id = p_partition_id and p.queue_id = p_queue_id
         and p.head_offset > greatest(coalesce(c.cursor_offset, 0), p.first_offset - 1)
         and (c.lease_id is null or c.lease_expires_at <= now())
         and (c.retry_at is null or c.retry_at <= now())
         and (v_buffer_s = 0 or p.last_created_at <= now() - make_interval(secs => v_buffer_s));
  elsif not v_listed then
    -- The group could not be listed this time (log_pending_start_v1): every
    -- partition of the queue, in turn after p_after (fair) or oldest
    -- pending message first.
    open v_cands for
      select p.id, p.name, p.first_offset
        from queen.partitions p
        join queen.cursors c on c.partition_id = p.id and c.consumer_group = p_group
       where p.queue_id = p_queue_id
         and p.head_offset > greatest(c.cursor_offset, p.first_offset - 1)
         and (c.lease_id is null or c.lease_expires_at <= now())
         and (c.retry_at is null or c.retry_at <= now())
       order by case when v_fair then p.id <= coalesce(p_after, p.id) end,
                case when v_fair then p.id end,
                (select m.created_at from queen.messages m
                  where m.partition_id = p.id and m.msg_offset > greatest(c.cursor_offset, p.first_offset - 1)
                  order by m.msg_offset limit 1) nulls last, p.id;
  elsif v_fair then
    -- The pending set in turn: first the partitions of p_again (phase 0),
    -- then ids after p_after (phase 1), then from the start up to p_after
    -- (phase 2). The same filters as below; drained rows, read here too,
    -- are dropped below.
    if v_weighted and cardinality(p_again) > 0 then v_phase := 0; end if;
    open v_cands for
      select p.id, p.name, p.first_offset
        from queen.pending pp
        join queen.partitions p on p.id = pp.partition_id
        left join queen.cursors c on c.partition_id = pp.partition_id and c.consumer_group = p_group
       where pp.queue_id = p_queue_id and pp.consumer_group = p_group
         and pp.partition_id > coalesce(p_after, '00000000-0000-0000-0000-000000000000'::uuid)
         and (c.lease_id is null or c.lease_expires_at <= now())
         and (c.retry_at is null or c.retry_at <= now())
         and (p.head_offset > greatest(coalesce(c.cursor_offset, 0), p.first_offset - 1)
              or pp.since < now() - interval '10 seconds')
       order by pp.partition_id;
  else
    -- The queue's pending set for the group (queen.pending, migration 027):
    -- what is read follows the partitions that hold work, not the
    -- partitions that exist. Leased partitions are passed over without a
    -- lock, and so are drained rows a push may soon fill again; a drained
    -- row older than that is dropped below, under its cursor's lock.
    -- Rows come in order of since, a lower bound of their oldest pending
    -- message's createdAt (pushes keep it so); the loop reads a row's true
    -- oldest and serves the oldest first, reading rows only until the next
    -- row's since is past the best it holds.
    open v_cands for
      select p.id, p.name, p.first_offset, pp.since, c.cursor_offset
        from queen.pending pp
        join queen.partitions p on p.id = pp.partition_id
        left join queen.cursors c on c.partition_id = pp.partition_id and c.consumer_group = p_group
       where pp.queue_id = p_queue_id and pp.consumer_group = p_group
         and (c.lease_id is null or c.lease_expires_at <= now())
         and (c.retry_at is null or c.retry_at <= now())
         and (p.head_offset > greatest(coalesce(c.cursor_offset, 0), p.first_offset - 1)
              or pp.since < now() - interval '10 seconds')
       order by pp.since, pp.partition_id;
    fetch v_cands into v_next;
    v_more := found;
  end if;
  loop
    exit when v_remaining <= 0 or v_claimed >= p_max_partitions or v_bytes_left <= 0;
    if p_partition_id is not null or not v_listed then
      fetch v_cands into v_cand;
      exit when not found;
    elsif v_fair then
      if v_phase = 0 then
        v_again := v_again + 1;
        if v_again >= cardinality(p_again) then v_phase := 1; end if;
        select p.id, p.name, p.first_offset into v_cand from queen.partitions p where p.id = p_again[v_again] and p.queue_id = p_queue_id;
        continue when not found;
      else
        fetch v_cands into v_cand;
        if not found then
          exit when v_phase = 2 or p_after is null;
          close v_cands;
          v_phase := 2;
          open v_cands for
            select p.id, p.name, p.first_offset
              from queen.pending pp
              join queen.partitions p on p.id = pp.partition_id
              left join queen.cursors c on c.partition_id = pp.partition_id and c.consumer_group = p_group
             where pp.queue_id = p_queue_id and pp.consumer_group = p_group
               and pp.partition_id <= p_after
               and (c.lease_id is null or c.lease_expires_at <= now())
               and (c.retry_at is null or c.retry_at <= now())
               and (p.head_offset > greatest(coalesce(c.cursor_offset, 0), p.first_offset - 1)
                    or pp.since < now() - interval '10 seconds')
             order by pp.partition_id;
          continue;
        end if;
      end if;
    else
      -- Read rows while the next one could hold an older message than the
      -- best read so far (its since is a lower bound); a drained row has no
      -- oldest and goes first, to be dropped.
      while v_more and (v_pick is null or v_keys[v_pick] > v_next.since) loop
        v_n := v_n + 1;
        v_ids[v_n] := v_next.id;
        v_names[v_n] := v_next.name;
        v_firsts[v_n] := v_next.first_offset;
        v_keys[v_n] := coalesce((select m.created_at from queen.messages m
                                  where m.partition_id = v_next.id
                                    and m.msg_offset > greatest(coalesce(v_next.cursor_offset, 0), v_next.first_offset - 1)
                                  order by m.msg_offset limit 1), '-infinity');
        if v_pick is null or v_keys[v_n] < v_keys[v_pick] then v_pick := v_n; end if;
        fetch v_cands into v_next;
        v_more := found;
      end loop;
      exit when v_pick is null;
      select v_ids[v_pick] as id, v_names[v_pick] as name, v_firsts[v_pick] as first_offset into v_cand;
      v_keys[v_pick] := null;
      v_pick := null;
      for i in 1 .. v_n loop
        if v_keys[i] is not null and (v_pick is null or v_keys[i] < v_keys[v_pick]) then v_pick := i; end if;
      end loop;
    end if;

    select * into v_cur from queen.cursors c
     where c.partition_id = v_cand.id and c.consumer_group = p_group
       for update skip locked;
    continue when not found;
    continue when v_cur.lease_id is not null and v_cur.lease_expires_at > now();
    continue when v_cur.retry_at > now();
    -- The partition as it stands now (the candidate row is as of the open).
    select p.head_offset, p.first_offset, p.last_created_at into v_head, v_first, v_last_created
      from queen.partitions p where p.id = v_cand.id;
    if v_head <= greatest(v_cur.cursor_offset, v_first - 1) then
      -- Nothing left for the group (an ack, a dead letter or retention
      -- emptied it): a pending row drained for a while goes, unless a push
      -- raised its head meanwhile or holds it (skip locked: a pop never
      -- waits on a push).
      if p_partition_id is null then
        perform queen.log_pending_drop_v1(p_queue_id, p_group, v_cand.id, greatest(v_cur.cursor_offset, v_first - 1));
      end if;
      continue;
    end if;
    continue when v_buffer_s > 0 and v_last_created > now() - make_interval(secs => v_buffer_s);

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

    v_from := greatest(v_cur.cursor_offset, v_first - 1);
    if v_conflate then
      -- Only the newest message goes; the claim (the lease, or an autoAck's
      -- cursor move) covers everything from v_from up to it.
      select m.msg_offset,
             coalesce(octet_length(m.payload::text), 4) + coalesce(octet_length(m.encrypted), 0)
               + octet_length(v_cand.name) + coalesce(octet_length(m.transaction_id), 36) + coalesce(octet_length(m.producer_sub), 4) + v_envelope
        into v_last, v_bytes
        from queen.messages m
       where m.partition_id = v_cand.id and m.msg_offset > v_from
         and (v_delay_s = 0 or m.created_at <= now() - make_interval(secs => v_delay_s))
       order by m.msg_offset desc limit 1;
      v_count := case when v_last is null or (p_max_bytes is not null and v_claimed > 0 and v_bytes > v_bytes_left) then 0 else 1 end;
    elsif p_max_bytes is null then
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
    v_deliver := case when v_conflate then v_last - 1 else v_from end;
    if v_weighted then v_weight := queen.partition_weight_v1(v_options, v_cand.name); end if;

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
             m.producer_sub, queen.iso(m.created_at), coalesce(f.retry_count, 0), 0, v_weight
        from queen.messages m
        left join queen.failures f on f.partition_id = m.partition_id and f.consumer_group = p_group and f.msg_offset = m.msg_offset
       where m.partition_id = v_cand.id and m.msg_offset > v_deliver and m.msg_offset <= v_last
       order by m.msg_offset;

    v_remaining := v_remaining - v_count;
    v_claimed   := v_claimed + 1;
    if p_max_bytes is not null then v_bytes_left := v_bytes_left - v_bytes; end if;
  end loop;
  close v_cands;
  -- The count of expired leases this call released, on one trailing row
  -- with no message, so the caller counts them without another round trip.
  if v_expired > 0 then
    return query select null::uuid, null::text, null::bigint, null::uuid, null::text, null::uuid,
                        null::jsonb, null::bytea, null::text, null::text, null::int, v_expired, null::int;
  end if;
end
$$;
