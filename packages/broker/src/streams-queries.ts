import type { FastifyInstance } from 'fastify';
import { QueenError, streamRoutes, type StreamRegisterBody } from '@queen-mq/protocol';
import type { BrokerContext } from './context.js';
import { registerRoute } from './http.js';

interface QueryRow {
  query_id: string;
  name: string;
  config_hash: string;
}

/**
 * Register (PROTOCOL §7.1). The query row is taken FOR UPDATE, which is also
 * what makes a reset wait for in-flight cycles of the query (they hold it FOR
 * KEY SHARE, §4 rank 3) before its state rows are deleted.
 */
async function registerQuery(ctx: BrokerContext, body: StreamRegisterBody) {
  const sink = body.sink_queue ?? null;
  return ctx.db.transaction(async (c) => {
    const select = () =>
      c.query<QueryRow>('select query_id, name, config_hash from queen_streams.queries where name = $1 for update', [body.name]);
    let row = (await select()).rows[0];
    if (!row) {
      const inserted = await c.query<QueryRow>(
        `insert into queen_streams.queries (name, source_queue, sink_queue, config_hash) values ($1, $2, $3, $4)
         on conflict (name) do nothing returning query_id, name, config_hash`,
        [body.name, body.source_queue, sink, body.config_hash],
      );
      if (inserted.rows[0]) {
        return { success: true as const, query_id: inserted.rows[0].query_id, name: body.name, config_hash: body.config_hash, fresh: true, reset: false };
      }
      // A concurrent register of the same name won the insert: treat it as registered.
      row = (await select()).rows[0]!;
    }
    if (body.reset) {
      // Reset wipes ALL state of the query, whatever the hash (fix: a same-hash reset used to keep it).
      await c.query('delete from queen_streams.state where query_id = $1', [row.query_id]);
    } else if (row.config_hash !== body.config_hash) {
      throw new QueenError(
        'CONFIG_HASH_MISMATCH',
        // Queen's client shows this text and its tests look for "config_hash mismatch" in it.
        `config_hash mismatch: stream query "${body.name}" is registered with a different config_hash; pass reset:true to replace it and wipe its state`,
        { extra: { success: false, query_id: row.query_id, name: row.name } },
      );
    }
    await c.query(
      'update queen_streams.queries set source_queue = $2, sink_queue = $3, config_hash = $4, updated_at = now() where query_id = $1',
      [row.query_id, body.source_queue, sink, body.config_hash],
    );
    return { success: true as const, query_id: row.query_id, name: row.name, config_hash: body.config_hash, fresh: false, reset: body.reset };
  });
}

/**
 * Drop (PROTOCOL §7.2): FOR UPDATE on the query row waits for every in-flight
 * cycle of the query; a cycle arriving later finds the row gone
 * (QUERY_NOT_FOUND). Consumer groups are untouched.
 */
async function dropQuery(ctx: BrokerContext, name: string) {
  return ctx.db.transaction(async (c) => {
    const { rows } = await c.query<QueryRow>('select query_id, name from queen_streams.queries where name = $1 for update', [name]);
    const row = rows[0];
    if (!row) throw new QueenError('QUERY_NOT_FOUND', `Stream query "${name}" not found`);
    const deleted = await c.query('delete from queen_streams.state where query_id = $1', [row.query_id]);
    await c.query('delete from queen_streams.queries where query_id = $1', [row.query_id]);
    return { success: true as const, query_id: row.query_id, name: row.name, state_rows_deleted: deleted.rowCount ?? 0 };
  });
}

export function streamQueryRoutes(app: FastifyInstance, ctx: BrokerContext): void {
  registerRoute(app, streamRoutes.streamsRegister, async ({ body }) => registerQuery(ctx, body));

  registerRoute(app, streamRoutes.streamsList, async ({ query }) => {
    const { rows } = await ctx.db.query(
      `select q.query_id, q.name, q.source_queue, q.sink_queue, q.config_hash,
              queen.iso(q.created_at) as created_at, queen.iso(q.updated_at) as updated_at,
              (select count(*) from queen_streams.state s where s.query_id = q.query_id)::int as state_rows
         from queen_streams.queries q
        order by q.name collate "C" limit $1 offset $2`,
      [query.limit, query.offset],
    );
    const { rows: count } = await ctx.db.query<{ n: number }>('select count(*)::int as n from queen_streams.queries');
    return { queries: rows, pagination: { limit: query.limit, offset: query.offset }, total: count[0]!.n };
  });

  registerRoute(app, streamRoutes.streamsDrop, async ({ body }) => dropQuery(ctx, body.name));
}
