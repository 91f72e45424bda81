import type { FastifyInstance } from 'fastify';
import { consoleRoutes, QueenError, WATERMARK_STATE_KEY } from '@queen-mq/protocol';
import type { BrokerContext } from '../context/context.js';
import { registerRoute } from '../http/http.js';

// Read-only views of a stream query for operators (the console, PROTOCOL
// extension): where its source group stands on each partition, and the
// windows it holds open. Window rows are recognised by shape — a state value
// with a numeric `windowEnd` (PROTOCOL §7.5 ripeness uses the same field) —
// so the broker needs no knowledge of the window plugins.

interface QueryRow {
  query_id: string;
  name: string;
  source_queue: string;
  sink_queue: string | null;
}

async function queryByName(ctx: BrokerContext, name: string): Promise<QueryRow> {
  const { rows } = await ctx.db.query<QueryRow>('select query_id, name, source_queue, sink_queue from queen_streams.queries where name = $1', [name]);
  if (!rows[0]) throw new QueenError('QUERY_NOT_FOUND', `Stream query "${name}" not found`);
  return rows[0];
}

/** Lag floor of a partition row `p` with cursor row `c` (may be absent). */
const FLOOR = 'greatest(coalesce(c.cursor_offset, 0), p.first_offset - 1)';
const IS_WINDOW = `jsonb_typeof(s.value->'windowEnd') = 'number'`;

export function streamInspectRoutes(app: FastifyInstance, ctx: BrokerContext): void {
  registerRoute(app, consoleRoutes.streamsPartitions, async ({ params, query }) => {
    const q = await queryByName(ctx, params.name);
    // The runner's default source group (core runner.ts): `streams.<query name>`.
    const group = query.consumerGroup ?? `streams.${q.name}`;
    const { rows } = await ctx.db.query(
      `select p.name as partition, p.id as partition_id, coalesce(c.cursor_offset, 0)::text as cursor,
              p.head_offset::text as head_offset, greatest(p.head_offset - ${FLOOR}, 0)::int as lag,
              coalesce(extract(epoch from now() - h.created_at), 0)::float8 as time_lag,
              coalesce(c.lease_id is not null and c.lease_expires_at > now(), false) as leased,
              coalesce(st.state_rows, 0)::int as state_rows, coalesce(st.open_windows, 0)::int as open_windows, st.watermark
         from queen.partitions p
         left join queen.cursors c on c.partition_id = p.id and c.consumer_group = $2
         left join lateral (
           select m.created_at from queen.messages m
            where m.partition_id = p.id and m.msg_offset > ${FLOOR}
            order by m.msg_offset limit 1) h on true
         left join lateral (
           select count(*) as state_rows, count(*) filter (where ${IS_WINDOW}) as open_windows,
                  max(case when s.key = $6 and jsonb_typeof(s.value->'eventTimeMs') = 'number' then (s.value->>'eventTimeMs')::float8 end) as watermark
             from queen_streams.state s where s.query_id = $1 and s.partition_id = p.id) st on true
        where p.queue_name = $3
        order by p.name limit $4 offset $5`,
      [q.query_id, group, q.source_queue, query.limit, query.offset, WATERMARK_STATE_KEY],
    );
    const { rows: count } = await ctx.db.query<{ n: number }>('select count(*)::int as n from queen.partitions where queue_name = $1', [q.source_queue]);
    return {
      query_id: q.query_id,
      name: q.name,
      source_queue: q.source_queue,
      sink_queue: q.sink_queue,
      consumer_group: group,
      partitions: rows,
      pagination: { limit: query.limit, offset: query.offset },
      total: count[0]!.n,
    };
  });

  // A join's shards are named by no partition: the `__join__` row of each holds its partition's name and both watermarks.
  registerRoute(app, consoleRoutes.streamsJoins, async ({ params, query }) => {
    const q = await queryByName(ctx, params.name);
    const { rows } = await ctx.db.query<{
      shard_id: string;
      partition: string | null;
      left_wm: number | null;
      right_wm: number | null;
      left_keys: number;
      left_records: number;
      right_keys: number;
      right_records: number;
      updated_at: string;
      total: string;
    }>(
      `select j.partition_id::text as shard_id, j.value->>'partition' as partition,
              (j.value->>'left')::float8 as left_wm, (j.value->>'right')::float8 as right_wm,
              coalesce(h.left_keys, 0)::int as left_keys, coalesce(h.left_records, 0)::int as left_records,
              coalesce(h.right_keys, 0)::int as right_keys, coalesce(h.right_records, 0)::int as right_records,
              queen.iso(j.updated_at) as updated_at, count(*) over () as total
         from queen_streams.state j
         left join lateral (
           select count(*) filter (where starts_with(s.key, 'join' || chr(31) || 'left' || chr(31))) as left_keys,
                  sum(jsonb_array_length(s.value->'records')) filter (where starts_with(s.key, 'join' || chr(31) || 'left' || chr(31))) as left_records,
                  count(*) filter (where starts_with(s.key, 'join' || chr(31) || 'right' || chr(31))) as right_keys,
                  sum(jsonb_array_length(s.value->'records')) filter (where starts_with(s.key, 'join' || chr(31) || 'right' || chr(31))) as right_records
             from queen_streams.state s
            where s.query_id = j.query_id and s.partition_id = j.partition_id and starts_with(s.key, 'join' || chr(31))) h on true
        where j.query_id = $1 and j.key = '__join__' and ($2::text is null or j.value->>'partition' = $2)
        order by j.value->>'partition', j.partition_id limit $3`,
      [q.query_id, query.partition ?? null, query.limit],
    );
    return {
      query_id: q.query_id,
      name: q.name,
      total: rows[0] ? Number(rows[0].total) : 0,
      shards: rows.map((r) => ({
        partition: r.partition,
        shard_id: r.shard_id,
        left: { watermark: r.left_wm, keys: r.left_keys, records: r.left_records },
        right: { watermark: r.right_wm, keys: r.right_keys, records: r.right_records },
        updated_at: r.updated_at,
      })),
    };
  });

  registerRoute(app, consoleRoutes.streamsWindows, async ({ params, query }) => {
    const q = await queryByName(ctx, params.name);
    const { rows } = await ctx.db.query<{
      partition_id: string;
      partition: string | null;
      key: string;
      window_start: number | null;
      window_end: number;
      value: unknown;
      version: string;
      updated_at: string;
      now: number;
      total: string;
    }>(
      `select s.partition_id, p.name as partition, s.key,
              case when jsonb_typeof(s.value->'windowStart') = 'number' then (s.value->>'windowStart')::float8 end as window_start,
              (s.value->>'windowEnd')::float8 as window_end,
              s.value - 'windowStart' - 'windowEnd' as value, s.version::text as version, queen.iso(s.updated_at) as updated_at,
              (extract(epoch from now()) * 1000)::float8 as now, count(*) over () as total
         from queen_streams.state s
         left join queen.partitions p on p.id = s.partition_id
        where s.query_id = $1 and ${IS_WINDOW}
          and ($2::text is null or (p.queue_name = $3 and p.name = $2))
        order by window_end, s.key limit $4`,
      [q.query_id, query.partition ?? null, q.source_queue, query.limit],
    );
    let now = rows[0]?.now;
    if (now === undefined) {
      const { rows: clock } = await ctx.db.query<{ now: number }>('select (extract(epoch from now()) * 1000)::float8 as now');
      now = clock[0]!.now;
    }
    return {
      query_id: q.query_id,
      name: q.name,
      now,
      total: rows[0] ? Number(rows[0].total) : 0,
      windows: rows.map((r) => ({
        partition: r.partition,
        partition_id: r.partition_id,
        key: r.key,
        window_key: r.key.slice(r.key.lastIndexOf('\u001f') + 1),
        window_start: r.window_start,
        window_end: r.window_end,
        value: r.value,
        version: Number(r.version),
        updated_at: r.updated_at,
        ripe: r.window_end <= now,
      })),
    };
  });
}
