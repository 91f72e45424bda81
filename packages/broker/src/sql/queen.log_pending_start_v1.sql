-- A group's first wildcard pop of a queue (issue 31, migration 027): the
-- group is listed in queen.pending_groups, so every later push keeps its
-- pending rows, and the partitions that already hold something for it get
-- their pending rows (and their cursor rows). It reads every partition of
-- the queue once per (queue, group), not on every pop.
-- Cursor rows first, ascending, before the pending lock: their key check
-- locks partition rows, which a push holds while it waits for that lock.
-- Then, under the queue's pending lock taken exclusively: pushes in flight
-- have committed and are seen, later ones wait and then see the listing. A
-- partition first pushed in between has no cursor row yet: its pending row
-- asks the next pop to create it (needs_cursor). If the lock cannot be had
-- within a second (pushes hold it shared without a pause) the group stays
-- unlisted and this answers false: the pop reads the partitions this time.
-- Rows a push left for the group (it read the listing before a group delete
-- removed it) are corrected, not kept: since must stay a lower bound.
create or replace function queen.log_pending_start_v1(p_queue_id uuid, p_group text) returns boolean
language plpgsql set enable_seqscan = off as $$
begin
  insert into queen.cursors (partition_id, consumer_group, cursor_offset)
  select p.id, p_group, queen.log_cursor_start_v1(p.id, p_group)
    from queen.partitions p
   where p.queue_id = p_queue_id
     and p.head_offset > 0
     and not exists (select 1 from queen.cursors c where c.partition_id = p.id and c.consumer_group = p_group offset 0)
   order by p.id
  on conflict do nothing;

  if not queen.log_pending_lock_v1(p_queue_id, false, 1000, false) then return false; end if;
  insert into queen.pending_groups (queue_id, consumer_group) values (p_queue_id, p_group) on conflict do nothing;
  if not found then return true; end if;

  insert into queen.pending (queue_id, consumer_group, partition_id, head_offset, since, needs_cursor)
  select p_queue_id, p_group, p.id, p.head_offset,
         coalesce((select m.created_at from queen.messages m
                    where m.partition_id = p.id and m.msg_offset > greatest(coalesce(c.cursor_offset, 0), p.first_offset - 1)
                    order by m.msg_offset limit 1), now()),
         c.partition_id is null
    from queen.partitions p
    left join queen.cursors c on c.partition_id = p.id and c.consumer_group = p_group
   where p.queue_id = p_queue_id
     and p.head_offset > greatest(coalesce(c.cursor_offset, 0), p.first_offset - 1)
  on conflict (queue_id, consumer_group, partition_id)
  do update set head_offset = greatest(pending.head_offset, excluded.head_offset), since = least(pending.since, excluded.since),
                needs_cursor = pending.needs_cursor or excluded.needs_cursor;
  return true;
end
$$;
