import type pg from 'pg';
import { lockShard } from '../streams/shard-lock.js';

// State that expires: a query registered with state_ttl_seconds (a
// gate's stateTtlSeconds) has every key row that was not written for that
// long deleted by the maintenance pass. Each (query, partition) is swept in
// its own transaction under the locks a cycle takes, in the cycle's order
// (the query row FOR KEY SHARE, then the shard's advisory lock), so a sweep
// never interleaves with a cycle of that shard; a cycle that read a row the
// sweep then deleted fails its compare-and-set and reads again.

/** The (query, partition) pairs holding at least one expired row, with their query's TTL. */
export async function expiredStateShards(client: pg.PoolClient): Promise<{ query_id: string; partition_id: string; ttl: number }[]> {
  const { rows } = await client.query<{ query_id: string; partition_id: string; ttl: number }>(
    `select distinct s.query_id, s.partition_id, q.state_ttl_seconds as ttl
       from queen_streams.queries q
       join queen_streams.state s on s.query_id = q.query_id
      where q.state_ttl_seconds is not null
        and s.updated_at < now() - make_interval(secs => q.state_ttl_seconds)
        and s.key not like '\\_\\_%'`,
  );
  return rows;
}

/** Deletes one shard's expired key rows (never the runner's own `__` rows); answers how many. */
export async function deleteExpiredState(client: pg.PoolClient, shard: { query_id: string; partition_id: string; ttl: number }): Promise<number> {
  const { rowCount } = await client.query('select 1 from queen_streams.queries where query_id = $1 for key share', [shard.query_id]);
  if (!rowCount) return 0;
  await lockShard(client, shard.query_id, shard.partition_id);
  const deleted = await client.query(
    `delete from queen_streams.state s
      where s.query_id = $1 and s.partition_id = $2 and s.key not like '\\_\\_%'
        and s.updated_at < now() - make_interval(secs => $3)`,
    [shard.query_id, shard.partition_id, shard.ttl],
  );
  return deleted.rowCount ?? 0;
}
