import { createHash } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { planStages, QueenError, streamRoutes, type StreamPlan, type StreamPlanBody, type StreamStage } from '@queen-mq/protocol';
import type { BrokerContext } from '../context/context.js';
import type { Database } from '../db/database.js';
import { registerRoute } from '../http/http.js';

// Queries that evolve: the plan of a new version against the
// registered one, the version a runner commits as, and the per-partition
// migration rows a state-rewriting version leaves for its runners.

/** A pool or a transaction's client. */
interface Queryable {
  query<R extends Record<string, unknown>>(text: string, values?: unknown[]): Promise<{ rows: R[] }>;
}

/** The version a runner commits as: a hash of its stages (code hashes included); null without stages. */
export function versionOf(stages: readonly StreamStage[] | undefined): string | null {
  if (!stages) return null;
  return createHash('sha256').update(JSON.stringify(stages)).digest('hex');
}

async function stateRows(c: Queryable, queryId: string): Promise<number> {
  const { rows } = await c.query<{ n: number }>('select count(*)::int as n from queen_streams.state where query_id = $1', [queryId]);
  return rows[0]!.n;
}

/** The plan of `proposed` against the registered stages, with the query's live row count. */
export async function planAgainst(c: Queryable, queryId: string, registered: readonly StreamStage[], proposed: readonly StreamStage[], migrate: readonly string[]): Promise<StreamPlan> {
  return planStages(registered, proposed, await stateRows(c, queryId), new Set(migrate));
}

/**
 * A version that migrates state leaves one pending row per partition holding
 * state now; its runners claim and rewrite each before they run (a partition
 * that gets state later is written by the new version already).
 */
export async function migrationsOnRegister(c: Queryable, queryId: string, version: string, plan: StreamPlan): Promise<void> {
  if (!plan.stages.some((s) => s.state_action === 'migrate')) return;
  await c.query(
    `insert into queen_streams.state_migrations (query_id, partition_id, version)
     select distinct s.query_id, s.partition_id, $2 from queen_streams.state s where s.query_id = $1
     on conflict do nothing`,
    [queryId, version],
  );
}

export async function pendingMigrations(c: Queryable, queryId: string, version: string): Promise<string[]> {
  const { rows } = await c.query<{ partition_id: string }>(
    'select partition_id from queen_streams.state_migrations where query_id = $1 and version = $2 and done_at is null order by partition_id',
    [queryId, version],
  );
  return rows.map((r) => r.partition_id);
}

/** Keeps a version as the query's proposed one (a plan, or a register that was refused). */
export async function recordProposal(db: Database, body: Pick<StreamPlanBody, 'name' | 'config_hash' | 'stages' | 'migrate'>): Promise<void> {
  await db.query('update queen_streams.queries set proposed = $2 where name = $1', [
    body.name,
    JSON.stringify({ config_hash: body.config_hash, stages: body.stages, migrate: body.migrate }),
  ]);
}

interface PlanRow {
  query_id: string;
  name: string;
  config_hash: string;
  stages: StreamStage[] | null;
  proposed: { config_hash: string; stages: StreamStage[]; migrate: string[] } | null;
}

async function queryForPlan(db: Database, name: string): Promise<PlanRow> {
  const { rows } = await db.query<PlanRow>('select query_id, name, config_hash, stages, proposed from queen_streams.queries where name = $1', [name]);
  if (!rows[0]) throw new QueenError('QUERY_NOT_FOUND', `Stream query "${name}" not found`);
  return rows[0];
}

async function answerPlan(db: Database, row: PlanRow, proposed: { config_hash: string; stages: StreamStage[]; migrate: string[] }) {
  const rows = await stateRows(db, row.query_id);
  // A query registered before stages were recorded compares as one whose every stage is new.
  const plan = planStages(row.stages ?? [], proposed.stages, rows, new Set(proposed.migrate));
  return { success: true as const, query_id: row.query_id, name: row.name, registered_config_hash: row.config_hash, config_hash: proposed.config_hash, state_rows: rows, plan };
}

export function streamPlanRoutes(app: FastifyInstance, ctx: BrokerContext): void {
  registerRoute(app, streamRoutes.streamsPlan, async ({ body }) => {
    const row = await queryForPlan(ctx.db, body.name);
    await recordProposal(ctx.db, body);
    return answerPlan(ctx.db, row, body);
  });
  registerRoute(app, streamRoutes.streamsPlanShow, async ({ params }) => {
    const row = await queryForPlan(ctx.db, params.name);
    if (!row.proposed) throw new QueenError('PLAN_NOT_FOUND', `No new version of stream query "${params.name}" was proposed`);
    return answerPlan(ctx.db, row, row.proposed);
  });
}
