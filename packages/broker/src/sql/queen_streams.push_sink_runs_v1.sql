-- A cycle's sink pushes: `sink_items` already in the allocator's shape
-- ({partition_id, payload, transaction_id, trace_id, encrypted?}, partitions
-- ensured by the route), passed to queen.log_push_many_v1 as they are, and
-- an answer of three arrays ({status, message_id, offset}, item order) that
-- the route expands into push_results from its own items (streams/cycle.ts):
-- rebuilding hundreds of items into that shape and as many result objects
-- out of it in SQL cost most of a map cycle's SQL time.
create or replace function queen_streams.push_sink_runs_v1(p_items jsonb, p_producer_sub text) returns jsonb
language sql as $$
  select jsonb_build_object(
           'status', coalesce(jsonb_agg(r.status order by r.n), '[]'::jsonb),
           'message_id', coalesce(jsonb_agg(r.message_id order by r.n), '[]'::jsonb),
           'offset', coalesce(jsonb_agg(r.off::text order by r.n), '[]'::jsonb))
    from queen.log_push_many_v1(p_items, p_producer_sub) with ordinality as r(status, message_id, off, n)
   where jsonb_array_length(p_items) > 0
$$;
