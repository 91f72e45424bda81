-- The delay (ms) before a consumer group may see a message again after its
-- p_count-th failure (issue 32, PROTOCOL §3.5); 0 when the queue sets no
-- retryDelay (then a failed message is redelivered at once, as in Queen v1,
-- which stores retry_delay and never reads it).
--   fixed (default)   retryDelay, exactly;
--   exponential       retryDelay * 2^(n-1), plus a jitter of up to a quarter
--                     of that on top: never shorter than nominal, and each
--                     step longer than the one before (2x > 1.25x) until
--                     the bound. Jitter spreads the retries of partitions
--                     that failed together (a downstream outage).
-- retryDelayMax (ms, 0: none but 2^31-1) bounds either mode.
create or replace function queen.retry_delay_ms_v1(p_options jsonb, p_count int) returns double precision
language sql volatile as $$
  select case
    when coalesce((p_options->>'retryDelay')::bigint, 0) <= 0 then 0
    when p_options->>'retryBackoff' = 'exponential' then
      least((p_options->>'retryDelay')::bigint * power(2::double precision, least(greatest(p_count, 1) - 1, 40)) * (1 + random() / 4), b.bound)
    else least((p_options->>'retryDelay')::bigint, b.bound)
  end
  from (select coalesce(nullif((p_options->>'retryDelayMax')::bigint, 0), 2147483647)::double precision as bound) b
$$;
