-- Creates missing queues and partitions (committed on its own, before the main
-- transaction, PROTOCOL §4) and answers the partition ids. targets: [{queue, partition}]
create or replace function queen.ensure_partitions_v1(p_targets jsonb)
returns table (queue_name text, partition_name text, partition_id uuid, queue_id uuid)
language plpgsql as $$
#variable_conflict use_column
begin
  insert into queen.queues (name, namespace, task)
  select distinct t->>'queue', split_part(t->>'queue', '.', 1), nullif(split_part(t->>'queue', '.', 2), '')
    from jsonb_array_elements(p_targets) t
  on conflict (name) do nothing;

  insert into queen.partitions (queue_id, queue_name, name)
  select distinct q.id, q.name, t->>'partition'
    from jsonb_array_elements(p_targets) t join queen.queues q on q.name = t->>'queue'
  on conflict (queue_id, name) do nothing;

  return query
  select q.name, p.name, p.id, q.id
    from (select distinct t->>'queue' as qn, t->>'partition' as pn from jsonb_array_elements(p_targets) t) t
    join queen.queues q on q.name = t.qn
    join queen.partitions p on p.queue_id = q.id and p.name = t.pn;
end
$$;
