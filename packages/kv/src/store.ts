import type pg from 'pg';
import type { Database } from '@queen-mq/broker';
import { QueenError, type KvEntry, type KvListQuery, type KvNamespacesQuery, type TxnKvOp } from '@queen-mq/protocol';
import { KV_APPLY_SQL, type AppliedOp, type KvApplyRow } from './sql/queen.kv_apply_v1.js';
import { KV_PURGE_EXPIRED_SQL, type KvPurgeExpiredRow } from './sql/queen.kv_purge_expired_v1.js';

// The KV's SQL, one function per operation. Writes all go through
// queen.kv_apply_v1 (src/sql/queen.kv_apply_v1.sql), which takes the rank-1 locks of
// PROTOCOL §4 up front and applies the ops in array order.

/** An op as the SQL reads it: validated, defaults applied, absent fields omitted. */
export type KvWireOp = TxnKvOp | { op: 'set'; namespace: string; key: string; value: unknown; ttlSeconds?: number; expectedVersion?: number };

/**
 * Applies ops on `client`, which must be inside a transaction. Throws the
 * first failing op's QueenError (VERSION_CONFLICT with `currentVersion`,
 * KV_TYPE_MISMATCH, KV_MAX_EXCEEDED; worded from the catalogue, naming the
 * op's key); everything it wrote must then be rolled back by the caller (the
 * transaction helpers do that on any throw).
 */
export async function applyKvOps(client: pg.PoolClient, ops: KvWireOp[]): Promise<AppliedOp[]> {
  const { rows } = await client.query<KvApplyRow>(KV_APPLY_SQL, [JSON.stringify(ops)]);
  const r = rows[0]!.r;
  if (!r.ok) {
    const op = ops[r.index]!;
    throw new QueenError(r.code, undefined, {
      params: {
        key: `${op.namespace}/${op.key}`,
        expected: 'expectedVersion' in op ? op.expectedVersion : undefined,
        currentVersion: r.currentVersion,
        max: 'max' in op ? op.max : undefined,
      },
      extra: r.currentVersion === undefined ? {} : { currentVersion: r.currentVersion },
    });
  }
  return r.results;
}

const entryColumns = `namespace, key, value, version::float8 as version, queen.iso(expires_at) as "expiresAt", queen.iso(updated_at) as "updatedAt"`;

/** A live entry, or null when the key is absent or expired. */
export async function getEntry(db: Database, namespace: string, key: string): Promise<KvEntry | null> {
  const { rows } = await db.query<KvEntry>(
    `select ${entryColumns} from queen.kv where namespace = $1 and key = $2 and queen.kv_live(expires_at)`,
    [namespace, key],
  );
  return rows[0] ?? null;
}

/**
 * One page of live keys in bytewise order (the columns are collate "C"):
 * `prefix` matched literally, `after` exclusive; `nextAfter` is null on the
 * last page.
 */
export async function listEntries(db: Database, namespace: string, q: KvListQuery) {
  const { rows } = await db.query<KvEntry>(
    `select ${entryColumns} from queen.kv
      where namespace = $1 and queen.kv_live(expires_at)
        and ($2::text is null or (key >= $2 and starts_with(key, $2)))
        and ($3::text is null or key > $3)
      order by key
      limit $4`,
    [namespace, q.prefix ?? null, q.after ?? null, q.limit + 1],
  );
  const more = rows.length > q.limit;
  const page = more ? rows.slice(0, q.limit) : rows;
  return {
    items: page.map(({ namespace: _ns, ...item }) => item),
    nextAfter: more ? page[page.length - 1]!.key : null,
  };
}

/**
 * A page of namespaces, found by skipping from one to the next on the primary
 * key (one index probe per namespace, however many keys each holds).
 */
export async function listNamespaces(db: Database, q: KvNamespacesQuery) {
  const { rows } = await db.query<{ namespace: string }>(
    `with recursive ns as (
       (select namespace from queen.kv where $1::text is null or namespace > $1 order by namespace limit 1)
       union all
       select (select k.namespace from queen.kv k where k.namespace > ns.namespace order by k.namespace limit 1)
         from ns where ns.namespace is not null
     )
     select namespace from ns where namespace is not null limit $2`,
    [q.after ?? null, q.limit + 1],
  );
  const more = rows.length > q.limit;
  const page = rows.slice(0, q.limit).map((r) => r.namespace);
  return { namespaces: page, nextAfter: more ? page[page.length - 1]! : null };
}

/** Deletes expired rows (rows a writer holds are left for the next pass). */
export async function purgeExpired(client: pg.PoolClient): Promise<number> {
  const { rows } = await client.query<KvPurgeExpiredRow>(KV_PURGE_EXPIRED_SQL);
  return rows[0]!.n;
}
