import type { FastifyInstance } from 'fastify';
import { QueenError, streamRoutes, type StreamPlan, type StreamRegisterBody } from '@queen-mq/protocol';
import type { BrokerContext } from '../context/context.js';
import { registerRoute } from '../http/http.js';
import { migrationsOnRegister, streamPlanRoutes, pendingMigrations, planAgainst, recordProposal, versionOf } from './plan.js';

interface QueryRow {
  query_id: string;
  name: string;
  config_hash: string;
  stages: StreamRegisterBody['stages'] | null;
  version?: string | null;
}

/** The 409 of a changed chain; `plan` says why stage by stage when both versions named their stages. */
function configHashMismatch(body: StreamRegisterBody, row: QueryRow, plan?: StreamPlan): QueenError {
  return new QueenError(
    'CONFIG_HASH_MISMATCH',
    // Queen's client shows this text and its tests look for "config_hash mismatch" in it.
    `config_hash mismatch: stream query "${body.name}" is registered with a different config_hash; pass reset:true to replace it and wipe its state`,
    { extra: { success: false, query_id: row.query_id, name: row.name, ...(plan ? { plan } : {}) } },
  );
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
      c.query<QueryRow>('select query_id, name, config_hash, stages, version from queen_streams.queries where name = $1 for update', [body.name]);
    const version = versionOf(body.stages);
    let row = (await select()).rows[0];
    if (!row) {
      const inserted = await c.query<QueryRow>(
        `insert into queen_streams.queries (name, source_queue, sink_queue, config_hash, stages, version, state_ttl_seconds) values ($1, $2, $3, $4, $5, $6, $7)
         on conflict (name) do nothing returning query_id, name, config_hash`,
        [body.name, body.source_queue, sink, body.config_hash, body.stages ? JSON.stringify(body.stages) : null, version, body.state_ttl_seconds ?? null],
      );
      if (inserted.rows[0]) {
        return { success: true as const, query_id: inserted.rows[0].query_id, name: body.name, config_hash: body.config_hash, fresh: true, reset: false, pending_migrations: [], version, flush_sources: true };
      }
      // A concurrent register of the same name won the insert: treat it as registered.
      row = (await select()).rows[0]!;
    }
    let plan: StreamPlan | undefined;
    if (body.reset) {
      // Reset wipes ALL state of the query, whatever the hash (fix: a same-hash reset used to keep it).
      await c.query('delete from queen_streams.state where query_id = $1', [row.query_id]);
      await c.query('delete from queen_streams.state_migrations where query_id = $1', [row.query_id]);
    } else if (row.stages && body.stages && row.version !== version) {
      // Both versions named their stages: compare them stage by stage.
      plan = await planAgainst(c, row.query_id, row.stages, body.stages, body.migrate);
      const consented = body.upgrade === 'keep-state' || body.migrate.length > 0;
      if (plan.verdict === 'blocked' || (plan.verdict === 'keep-state' && !consented)) {
        throw configHashMismatch(body, row, plan);
      }
      await migrationsOnRegister(c, row.query_id, version!, plan);
    } else if (!(row.stages && body.stages) && row.config_hash !== body.config_hash) {
      throw configHashMismatch(body, row);
    }
    await c.query(
      `update queen_streams.queries set source_queue = $2, sink_queue = $3, config_hash = $4, stages = $5, version = $6, proposed = null,
              state_ttl_seconds = $7, updated_at = now()
        where query_id = $1`,
      [row.query_id, body.source_queue, sink, body.config_hash, body.stages ? JSON.stringify(body.stages) : null, version, body.state_ttl_seconds ?? null],
    );
    const pending = version ? await pendingMigrations(c, row.query_id, version) : [];
    return { success: true as const, query_id: row.query_id, name: row.name, config_hash: body.config_hash, fresh: false, reset: body.reset, ...(plan ? { plan } : {}), pending_migrations: pending, version, flush_sources: true };
  }).catch(async (err: unknown) => {
    // A refused version is kept as the proposed one, for `queen streams plan <query>`.
    if (err instanceof QueenError && err.code === 'CONFIG_HASH_MISMATCH' && body.stages) await recordProposal(ctx.db, { ...body, stages: body.stages });
    throw err;
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
  streamPlanRoutes(app, ctx);
}
