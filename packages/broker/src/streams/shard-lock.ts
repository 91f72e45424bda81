import type pg from 'pg';

/**
 * The (query, partition) advisory lock every stream cycle takes
 * (queen_streams.apply_element) after the query row: what else writes a
 * shard's state (a migration, the expiry sweep) takes it too, in that order.
 */
export async function lockShard(client: pg.PoolClient, queryId: string, partitionId: string): Promise<void> {
  await client.query(`select pg_advisory_xact_lock(hashtextextended($1::uuid::text || ':' || $2::uuid::text, 0))`, [queryId, partitionId]);
}
