import type { FastifyInstance } from 'fastify';
import type pg from 'pg';
import { QueenError, streamRoutes, type MigrationCommitBody } from '@queen-mq/protocol';
import type { BrokerContext } from '../context/context.js';
import { registerRoute } from '../http/http.js';
import { lockShard } from './shard-lock.js';

// A version that rewrites state (`migrateState`) is applied once per
// partition: a runner claims the partition's migration row, reads the rows,
// rewrites them in its own process, and commits the new rows here in one
// transaction under the partition lock a cycle takes, which also marks the
// row done. A second runner of the same version finds it claimed and waits
// (or takes it over once the claim's lease ran out: its claimer died).


interface MigrationRow {
  claim_id: string | null;
  claim_live: boolean;
  done: boolean;
}

/** The query must still be at this version: a newer register supersedes the migration. */
async function lockVersion(c: pg.PoolClient, queryId: string, version: string): Promise<void> {
  const { rows } = await c.query<{ version: string | null }>('select version from queen_streams.queries where query_id = $1 for key share', [queryId]);
  if (!rows[0]) throw new QueenError('QUERY_NOT_FOUND', 'Stream query not found');
  if (rows[0].version !== version) throw new QueenError('QUERY_VERSION_CHANGED', 'Another version of this stream query was registered; this migration no longer applies');
}

async function commitMigration(ctx: BrokerContext, body: MigrationCommitBody) {
  return ctx.db.transaction(async (c) => {
    await lockVersion(c, body.query_id, body.version);
    await lockShard(c, body.query_id, body.partition_id);
    const { rows } = await c.query<{ claim_id: string | null; done: boolean }>(
      `select claim_id, done_at is not null as done from queen_streams.state_migrations
        where query_id = $1 and partition_id = $2 and version = $3 for update`,
      [body.query_id, body.partition_id, body.version],
    );
    const row = rows[0];
    if (!row || row.done || row.claim_id !== body.claim_id) throw new QueenError('MIGRATION_NOT_CLAIMED', 'This runner does not hold the claim on this migration');
    let applied = 0;
    if (body.state_ops.length > 0) {
      try {
        const res = await c.query<{ r: { applied: number } }>('select queen_streams.apply_state_ops_v1($1, $2, $3::jsonb) as r', [
          body.query_id,
          body.partition_id,
          JSON.stringify(body.state_ops),
        ]);
        applied = Number(res.rows[0]!.r.applied);
      } catch (err) {
        // A row changed since the runner read it (apply_state_ops_v1 raises QS001 VERSION_CONFLICT): nothing is kept, the runner reads again.
        if ((err as { code?: string }).code === 'QS001') throw new QueenError('VERSION_CONFLICT', 'A state row changed since the migration read it; read and migrate again');
        throw err;
      }
    }
    await c.query(
      `update queen_streams.state_migrations set done_at = now(), rows_written = $4, claim_expires_at = null
        where query_id = $1 and partition_id = $2 and version = $3`,
      [body.query_id, body.partition_id, body.version, applied],
    );
    return { success: true as const, state_ops_applied: applied };
  });
}

export function streamMigrationRoutes(app: FastifyInstance, ctx: BrokerContext): void {
  registerRoute(app, streamRoutes.streamsMigrationClaim, async ({ body }) =>
    ctx.db.transaction(async (c) => {
      await lockVersion(c, body.query_id, body.version);
      const { rows } = await c.query<MigrationRow>(
        `select claim_id, coalesce(claim_expires_at > now(), false) as claim_live, done_at is not null as done
           from queen_streams.state_migrations where query_id = $1 and partition_id = $2 and version = $3 for update`,
        [body.query_id, body.partition_id, body.version],
      );
      const row = rows[0];
      // No row: the partition held no state when the version was registered; nothing to migrate.
      if (!row || row.done) return { success: true as const, claimed: false, done: true };
      if (row.claim_live && row.claim_id !== body.claim_id) return { success: true as const, claimed: false, done: false };
      await c.query(
        `update queen_streams.state_migrations set claim_id = $4, claim_expires_at = now() + make_interval(secs => $5)
          where query_id = $1 and partition_id = $2 and version = $3`,
        [body.query_id, body.partition_id, body.version, body.claim_id, body.lease_seconds],
      );
      return { success: true as const, claimed: true, done: false };
    }),
  );
  registerRoute(app, streamRoutes.streamsMigrationCommit, async ({ body }) => commitMigration(ctx, body));
}
