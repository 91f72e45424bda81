-- A cycle's push_results (PROTOCOL §7.4, the push result of §5.3) from the
-- allocator's compact answer ({status, message_id, offset} arrays, item
-- order) and the items' own fields: the SQL form of the broker's one
-- shaper, pushResultOf (push-results.ts), which a test holds it equal to.
create or replace function queen_streams.push_results_v1(p_answer jsonb, p_pids uuid[], p_queues text[], p_txids text[], p_traces jsonb[])
returns jsonb
language sql immutable as $$
  select coalesce(jsonb_agg(jsonb_build_object(
           'index', s.n - 1, 'transaction_id', coalesce(p_txids[s.n], s.message_id), 'status', s.status,
           'message_id', s.message_id, 'partition_id', p_pids[s.n], 'queueName', p_queues[s.n], 'offset', s.off)
         || case when s.status = 'queued' then jsonb_build_object('trace_id', coalesce(p_traces[s.n], 'null'::jsonb)) else '{}'::jsonb end
         order by s.n), '[]'::jsonb)
    from jsonb_array_elements_text(p_answer->'status') with ordinality as st(status, n)
    join lateral (select st.n, st.status, p_answer->'message_id'->>(st.n::int - 1) as message_id,
                         p_answer->'offset'->>(st.n::int - 1) as off) s on true
$$;
