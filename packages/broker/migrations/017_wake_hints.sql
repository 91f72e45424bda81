-- Fewer wake-ups for nothing (issue 12). A pop that got messages woke the
-- next pop parked in its line, and an ack that released a lease woke one
-- too, whether or not anything was left to claim. With one producer and four
-- consumers (the end-to-end bench) that was two pop statements finding
-- nothing for every one that found a batch, at ~0.5 ms of PostgreSQL each.
-- The pop and ack statements now ask these functions whether a pop could
-- claim something after them, and the broker wakes a waiter only then.
--
-- Both are volatile, so their query runs in a snapshot of its own, taken
-- when they are called: after the pop's claim or the ack's move in the same
-- statement, which the statement's own snapshot would not show (it would
-- still see the partitions just claimed as free). What a pop would claim is
-- read as queen.log_pop_v3 picks its candidates: messages after the cursor
-- (or the retained start) and no live lease. Delays and window buffers are
-- not applied, so an answer may be yes for messages not yet due (a wake-up
-- that finds nothing, as before), never no for messages that are due.

-- Whether a pop of p_group on the queue (or on its one partition) could
-- claim something now.
create function queen.log_claimable_any_v1(p_queue_id uuid, p_partition_id uuid, p_group text) returns boolean
language sql volatile as $$
  select exists (
    select 1
      from queen.partitions p
      left join queen.cursors c on c.partition_id = p.id and c.consumer_group = p_group
     where p.queue_id = p_queue_id
       and (p_partition_id is null or p.id = p_partition_id)
       and p.head_offset > greatest(coalesce(c.cursor_offset, 0), p.first_offset - 1)
       and (c.lease_id is null or c.lease_expires_at <= now()))
$$;

-- Which of p_partition_ids a pop of p_group could claim now.
create function queen.log_claimable_of_v1(p_partition_ids uuid[], p_group text) returns uuid[]
language sql volatile as $$
  select coalesce(array_agg(p.id), '{}')
    from queen.partitions p
    left join queen.cursors c on c.partition_id = p.id and c.consumer_group = p_group
   where p.id = any(p_partition_ids)
     and p.head_offset > greatest(coalesce(c.cursor_offset, 0), p.first_offset - 1)
     and (c.lease_id is null or c.lease_expires_at <= now())
$$;
