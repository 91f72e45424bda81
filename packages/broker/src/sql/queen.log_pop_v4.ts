import type { NamedStatement } from '../db/database.js';

// The TypeScript half of queen.log_pop_v4.sql, beside it: the pop statement
// that calls the function and the rows it answers. A change to the
// function's arguments or result is a change to both files.

/** One claimed message as the pop statement answers it. */
export interface PopRow {
  partition_id: string;
  partition_name: string;
  msg_offset: string;
  id: string;
  transaction_id: string;
  trace_id: string | null;
  /** Only read for messages with a trace_id (TRACEPARENTS_SQL). */
  traceparent: string | null;
  /** The stored payload's JSON text (null for an encrypted one). */
  payload: string | null;
  encrypted: Buffer | null;
  producer_sub: string | null;
  created_at: string;
  retry_count: number;
}

/**
 * One row of the pop statement: whether pops are paused (the same on every
 * row), and one row of queen.log_pop_v4: a claimed message, or its trailing
 * row counting expired leases it released (all message fields null). A pop
 * that claimed nothing answers one row with every log_pop_v4 field null.
 */
export interface PopAnswerRow extends PopRow {
  paused: boolean;
  lease_expired: number | null;
  /** The claimed partition's weight in a fair pop (partitionWeights; 1 without one). */
  weight: number | null;
  /** Whether a pop of the same line could claim something after this one (queen.log_claimable_any_v1); on message rows, when asked. */
  more: boolean | null;
  /** The row's place in log_pop_v4's answer (its order: partitions as claimed, offsets ascending). */
  n: string | null;
}

/**
 * The pop statement, parsed once per connection (the hot path of every
 * consumer): the queue/partition lookup, the pause flag and
 * queen.log_pop_v4 in one round trip, with nothing computed around the
 * claim that the broker can count itself (the messages, their partitions,
 * the expired leases). A CTE chain that counted them in SQL, sorted the
 * rows back into order and read traceparents for traced messages cost
 * about 0.2 ms of a 1.0 ms 100-message pop (p25 of 150 on one connection).
 * The payload comes as its JSON text, written into the answer as it is
 * (renderMessages): receiving the rows and writing the JSON costs the broker
 * about 3 µs a message, against about 5 µs of PostgreSQL for the ~30 text
 * concatenations of writing it in SQL. Traceparents are read by a second
 * statement, only for pops that claimed traced messages (TRACEPARENTS_SQL).
 * Parameters: $1 queue, $2 partition (null: any), $3 consumer group, $4
 * batch, $5 partitions at most, $6 autoAck, $7 lease id, $8 subscription
 * mode, $9 subscription start ('now', a timestamp or null), $10 bytes at
 * most (null: no bound), $11 whether to ask if more is left, $12 the
 * partition where the line's round of fair pops stands and $13 the
 * partitions owed more turns for their weight (claim-turns.ts; null for a
 * pop of one partition).
 */
export const POP_SQL: NamedStatement = {
  name: 'queen_pop',
  text: `with f as (select coalesce((select (value)::text::boolean from queen.flags where name = 'pop_paused'), false) as paused),
       t as (select queue_id, partition_id from queen.pop_target_v1($1, $2))
       select f.paused, r.partition_id, r.partition_name, r.msg_offset, r.id, r.transaction_id, r.trace_id, null::text as traceparent,
              r.payload::text as payload, r.encrypted, r.producer_sub, r.created_at, r.retry_count, r.lease_expired, r.weight, r.ordinality as n,
              -- Asked ($11) only when a pop of the line is parked. An
              -- uncorrelated subquery runs once, when first needed: at the
              -- first message row, after log_pop_v4 (a plpgsql function,
              -- run to its end before its first row comes out) has claimed.
              -- Its query has a snapshot of its own (migration 017): this
              -- statement's would still show the partitions just claimed as free.
              case when $11::boolean and r.msg_offset is not null
                   then (select queen.log_claimable_any_v1(t.queue_id, t.partition_id, $3) from t) end as more
         from f cross join t
         left join lateral queen.log_pop_v4(
              case when not f.paused and ($2::text is null or t.partition_id is not null) then t.queue_id end,
              t.partition_id, $3, $4, $5, $6, $7, $8,
              case when $9::text = 'now' then now() else $9::timestamptz end, $10, $12::uuid, $13::uuid[]) with ordinality r on true`,
};
