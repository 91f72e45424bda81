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
      const client = await sql.connect();
      try {
        await client.query('begin');
        const { rows } = await client.query('update plain.partitions set head = head + $2 where id = $1 returning head', [ids.get(queue)[partition], items.length]);
        await client.query(
          `insert into plain.messages (partition_id, msg_offset, id, payload)
           select $1, $2::bigint - $3::bigint + ord, gen_random_uuid(), p from unnest($4::jsonb[]) with ordinality as u(p, ord)`,
          [ids.get(queue)[partition], rows[0].head, items.length, items.map((i) => JSON.stringify(i))]);
        await client.query('commit');
      } finally {
        client.release();
      }
    },
    /** Transaction (1): the claim; null when no partition has pending rows. */
    async claim(queue) {
      const { rows } = await sql.query(
        `with c as (
           select c.partition_id, c.cursor from plain.cursors c join plain.partitions p on p.id = c.partition_id
            where p.queue = $1 and p.head > c.cursor and (c.lease_id is null or c.lease_expires < now())
            order by c.partition_id for update of c skip locked limit 1),
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
