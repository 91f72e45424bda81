-- A partition's weight in a fair wildcard pop (the queue's partitionWeights:
-- name prefix to weight): the weight of the longest prefix its name starts
-- with, 1 when none does.
create or replace function queen.partition_weight_v1(p_options jsonb, p_partition text) returns int
language sql immutable as $$
  select coalesce((select w.value::int
                     from jsonb_each_text(p_options->'partitionWeights') w
                    where left(p_partition, length(w.key)) = w.key
                    order by length(w.key) desc
                    limit 1), 1)
$$;
