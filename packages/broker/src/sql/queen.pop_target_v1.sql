-- The pop statement's own lookup of its queue and partition by name (pop.ts
-- POP_SQL): a top-level statement's generic plan is cached per connection
-- the same way, so the lookup lives here, under the same setting. Always one
-- row (declared: with the default estimate of 1000 rows, the statement's
-- generic plan looked dearer than a custom one and was never used); null
-- ids for an unknown queue or partition.
create or replace function queen.pop_target_v1(p_queue text, p_partition text)
returns table (queue_id uuid, partition_id uuid)
language sql stable
rows 1
set enable_seqscan = off
as $$
  select q.id, p.id
    from (select 1) one
    left join queen.queues q on q.name = p_queue
    left join queen.partitions p on p.queue_id = q.id and p.name = p_partition
$$;
