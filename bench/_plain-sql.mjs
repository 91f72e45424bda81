// The plain-SQL queue of the peers bench, written without any of our SQL
// functions: a partition row with its head, a cursor row with its lease, and
// the messages keyed like ours. Producer: one transaction moving the head by
// the batch and inserting the rows. Consumer: (1) claim a partition with
// pending rows FOR UPDATE SKIP LOCKED, set its lease, read up to `batch` rows
// after the cursor; (2) advance the cursor and clear the lease. Used in the
// bench's own process (the ceiling) and behind a bare HTTP server
// (_http-floor.mjs: the same work plus one HTTP hop per call).

export async function createPlainSchema(sql) {
  await sql.query(`
    create schema if not exists plain;
    create table if not exists plain.partitions (id bigserial primary key, queue text not null, name text not null, head bigint not null default 0, unique (queue, name));
    create table if not exists plain.cursors (partition_id bigint primary key, cursor bigint not null default 0, lease_id uuid, lease_expires timestamptz, lease_last bigint);
    create table if not exists plain.messages (partition_id bigint not null, msg_offset bigint not null, id uuid not null, payload jsonb, created_at timestamptz not null default now(),
                                 primary key (partition_id, msg_offset));`);
}

/** The claim's first step: one partition of queue $1 with pending rows and no live lease, locked. */
const CLAIM = `with c as (
           select c.partition_id, c.cursor from plain.cursors c join plain.partitions p on p.id = c.partition_id
            where p.queue = $1 and p.head > c.cursor and (c.lease_id is null or c.lease_expires < now())
            order by c.partition_id for update of c skip locked limit 1),`;

/**
 * One producer transaction: the partition's head moved by the batch, the rows
 * inserted after it. `payloads` are JSON texts. With `returning`, answers the
 * stored rows' offsets and ids (what a Queen push answers per item).
 */
async function append(sql, partitionId, payloads, returning = false) {
  const client = await sql.connect();
  try {
    await client.query('begin');
    const { rows } = await client.query('update plain.partitions set head = head + $2 where id = $1 returning head', [partitionId, payloads.length]);
    const inserted = await client.query(
      `insert into plain.messages (partition_id, msg_offset, id, payload)
       select $1, $2::bigint - $3::bigint + ord, gen_random_uuid(), p from unnest($4::jsonb[]) with ordinality as u(p, ord)${returning ? ' returning msg_offset, id' : ''}`,
      [partitionId, rows[0].head, payloads.length, payloads]);
    await client.query('commit');
    return inserted.rows;
  } finally {
    client.release();
  }
}

/** The queue on a pg.Pool; partition ids per queue are kept in memory. */
export function plainQueue(sql, { partitions, batch }) {
  const ids = new Map();
  return {
    async setup(queue) {
      const { rows } = await sql.query(
        `with p as (insert into plain.partitions (queue, name) select $1, 'p' || g from generate_series(0, $2 - 1) g returning id)
         insert into plain.cursors (partition_id) select id from p returning partition_id`, [queue, partitions]);
      ids.set(queue, rows.map((r) => r.partition_id));
    },
    async push(queue, partition, items) {
      await append(sql, ids.get(queue)[partition], items.map((i) => JSON.stringify(i)));
    },
    /** Transaction (1): the claim; null when no partition has pending rows. */
    async claim(queue) {
      const { rows } = await sql.query(
        `${CLAIM}
         m as (select m.msg_offset, m.id, m.payload from plain.messages m, c where m.partition_id = c.partition_id and m.msg_offset > c.cursor order by m.msg_offset limit $2),
         l as (update plain.cursors u set lease_id = gen_random_uuid(), lease_expires = now() + interval '60 s', lease_last = (select max(msg_offset) from m)
                 from c where u.partition_id = c.partition_id returning u.partition_id, u.lease_id, u.lease_last)
         select l.partition_id, l.lease_id, l.lease_last, (select json_agg(m) from m) as messages from l`, [queue, batch]);
      return rows[0] ?? null;
    },
    /** Transaction (2): the cursor past the claim, the lease cleared. */
    async release(claim) {
      await sql.query('update plain.cursors set cursor = $2, lease_id = null, lease_expires = null, lease_last = null where partition_id = $1 and lease_id = $3',
        [claim.partition_id, claim.lease_last, claim.lease_id]);
    },
  };
}

/**
 * The same queue reached by names, as Queen's wire names things (the wire
 * floor of _http-floor.mjs): partitions created on first push, a claim that
 * answers one row per message with what a popped message carries, a release
 * per partition of an ack.
 */
export function plainWireQueue(sql) {
  const byName = new Map();
  const names = new Map();
  return {
    /** The partition's id, created (with its cursor) on first use. */
    async partitionId(queue, name) {
      const key = `${queue}\u0000${name}`;
      let id = byName.get(key);
      if (id) return id;
      const { rows } = await sql.query(
        `with p as (insert into plain.partitions (queue, name) values ($1, $2) on conflict (queue, name) do update set name = excluded.name returning id),
              c as (insert into plain.cursors (partition_id) select id from p on conflict do nothing)
         select id from p`, [queue, name]);
      id = rows[0].id;
      byName.set(key, id);
      names.set(id, { queue, name });
      return id;
    },
    names: (id) => names.get(id),
    append: (partitionId, payloads) => append(sql, partitionId, payloads, true),
    /** Claims a partition of `queue` with pending rows: its lease and up to `batch` rows (the pop's), one per message ([] when none). */
    async claim(queue, batch) {
      const { rows } = await sql.query(
        `${CLAIM}
         m as (select m.partition_id, m.msg_offset, m.id, m.payload, m.created_at from plain.messages m, c
                where m.partition_id = c.partition_id and m.msg_offset > c.cursor order by m.msg_offset limit $2),
         l as (update plain.cursors u set lease_id = gen_random_uuid(), lease_expires = now() + interval '60 s', lease_last = (select max(msg_offset) from m)
                 from c where u.partition_id = c.partition_id returning u.lease_id)
         select m.partition_id, m.msg_offset, m.id, m.payload::text as payload, m.created_at::text as created_at, l.lease_id
           from m, l order by m.msg_offset`, [queue, batch]);
      return rows;
    },
    /** Each partition's cursor moved to its last acked offset and its lease cleared, when the lease is still the one given. */
    async release(partitionIds, lastOffsets, leaseIds) {
      await sql.query(
        `update plain.cursors c set cursor = v.last, lease_id = null, lease_expires = null, lease_last = null
           from unnest($1::bigint[], $2::bigint[], $3::uuid[]) as v(pid, last, lease)
          where c.partition_id = v.pid and c.lease_id = v.lease`, [partitionIds, lastOffsets, leaseIds]);
    },
  };
}
