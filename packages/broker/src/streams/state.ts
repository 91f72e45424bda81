import type { FastifyInstance } from 'fastify';
import { QueenError, STATE_GET_MAX_ROWS, streamRoutes, type StateGetBody } from '@queen-mq/protocol';
import type { BrokerContext } from '../context/context.js';
import { registerRoute } from '../http/http.js';

/**
 * State read (PROTOCOL §7.5). Filters are ANDed; an absent or empty filter
 * matches all. The prefix is compared literally (no LIKE, so `%`, `_` and `\`
 * are ordinary characters); `key >= prefix` lets the C-collated primary key
 * serve it as a range. Rows come back in bytewise key order, at most
 * `limit` (default and maximum STATE_GET_MAX_ROWS) a page; `next_after` is
 * the last key of a page when more rows match (the next page's `after`),
 * null on the last one.
 */
async function readState(ctx: BrokerContext, body: StateGetBody) {
  const known = await ctx.db.query('select 1 from queen_streams.queries where query_id = $1', [body.query_id]);
  if (known.rowCount === 0) throw new QueenError('QUERY_NOT_FOUND', `Stream query ${body.query_id} not found`);
  const limit = Math.min(body.limit ?? STATE_GET_MAX_ROWS, STATE_GET_MAX_ROWS);
  const { rows } = await ctx.db.query<{ key: string; value: unknown; version: string; updated_at: string }>(
    `select s.key, s.value, s.version, queen.iso(s.updated_at) as updated_at
       from queen_streams.state s
      where s.query_id = $1 and s.partition_id = $2
        and ($3::text[] is null or s.key = any($3::text[]))
        and ($4::text is null or (s.key >= $4::text and left(s.key, char_length($4::text)) = $4::text))
        and ($5::numeric is null or case when jsonb_typeof(s.value->'windowEnd') = 'number'
                                         then (s.value->'windowEnd')::numeric <= $5::numeric else false end)
        and ($6::text is null or s.key > $6::text)
      order by s.key collate "C"
      limit $7`,
    [
      body.query_id,
      body.partition_id,
      body.keys && body.keys.length > 0 ? body.keys : null,
      body.key_prefix ? body.key_prefix : null,
      body.ripe_at_or_before ?? null,
      body.after ?? null,
      limit + 1,
    ],
  );
  const more = rows.length > limit;
  if (more) rows.length = limit;
  return {
    success: true as const,
    rows: rows.map((r) => ({ key: r.key, value: r.value, version: Number(r.version), updated_at: r.updated_at })),
    next_after: more ? rows[rows.length - 1]!.key : null,
  };
}

export function streamStateRoutes(app: FastifyInstance, ctx: BrokerContext): void {
  registerRoute(app, streamRoutes.streamsStateGet, async ({ body }) => readState(ctx, body));
}
