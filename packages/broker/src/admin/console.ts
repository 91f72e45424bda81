import type { FastifyInstance } from 'fastify';
import { consoleRoutes, QueenError } from '@queen-mq/protocol';
import type { BrokerContext } from '../context/context.js';
import { readPayload } from '../log/encryption.js';
import { registerRoute } from '../http/http.js';
import { NAME_MATCHES } from './listing-search.js';
import { readWithTotals } from '../maintenance/listing-totals.js';

// The read-only routes behind the operator's console (packages/console):
// who is calling, queues at a glance, and a page of a queue's messages.
// They read; every action the console offers goes through the routes that
// already own it (seek, DLQ requeue/delete), at those routes' levels.

interface QueueRow {
  name: string;
  partitions: number;
  depth: string;
  retained: string;
  pushed: string;
  oldest: number;
  dlq: number;
  lastActivity: string | null;
  uncounted: boolean;
}

/**
 * One page of queues by name (?search= filters first) with their listing
 * totals (listing-totals.ts): one row per queue on the page, whatever the
 * number of its partitions. $1 limit, $2 offset, $3 search text or null.
 */
const CONSOLE_QUEUES_SQL = `with page as (select q.id, q.name from queen.queues q where ${NAME_MATCHES('q.name', '$3')} order by q.name limit $1 offset $2)
       select pg.name, coalesce(t.partitions, 0) as partitions, coalesce(t.depth, 0)::text as depth,
              coalesce(t.retained, 0)::text as retained, coalesce(t.pushed, 0)::text as pushed,
              coalesce(extract(epoch from now() - t.oldest_pending_at), 0)::float8 as oldest,
              coalesce(t.dlq, 0)::int as dlq, queen.iso(t.last_activity) as "lastActivity", t.queue_id is null as uncounted
         from page pg left join queen.queue_totals t on t.queue_id = pg.id
        order by pg.name`;

interface MessageRow {
  id: string;
  transactionId: string;
  offset: string;
  createdAt: string;
  traceId: string | null;
  producerSub: string | null;
  payload: unknown;
  encrypted: Buffer | null;
}

export function consoleApiRoutes(app: FastifyInstance, ctx: BrokerContext): void {
  registerRoute(app, consoleRoutes.consoleSession, async ({ request }) => ({
    // A read-only route: the auth hook has set a principal of at least that level.
    level: request.principal!.level,
    subject: request.principal!.subject,
    authEnabled: ctx.config.authEnabled,
    version: ctx.version,
    serverTime: new Date().toISOString(),
  }));

  registerRoute(app, consoleRoutes.consoleQueues, async ({ query }) => {
    const search = query.search || null;
    const rows = await readWithTotals(ctx.totals, async () => (await ctx.db.query<QueueRow>(CONSOLE_QUEUES_SQL, [query.limit, query.offset, search])).rows);
    const { rows: count } = await ctx.db.query<{ n: number }>(`select count(*)::int as n from queen.queues q where ${NAME_MATCHES('q.name', '$1')}`, [search]);
    return {
      queues: rows.map((r) => ({
        name: r.name,
        partitions: r.partitions,
        depth: Number(r.depth),
        retained: Number(r.retained),
        pushedTotal: Number(r.pushed),
        deliveredTotal: ctx.metrics.delivered.value({ queue: r.name }),
        oldestUnackedSeconds: Math.max(0, r.oldest),
        dlq: r.dlq,
        lastActivity: r.lastActivity,
      })),
      pagination: { limit: query.limit, offset: query.offset },
      total: count[0]!.n,
      serverTime: new Date().toISOString(),
    };
  });

  registerRoute(app, consoleRoutes.consoleMessages, async ({ params, query }) => {
    const { rows: queues } = await ctx.db.query<{ id: string }>('select id from queen.queues where name = $1', [params.queue]);
    if (!queues[0]) throw new QueenError('QUEUE_NOT_FOUND', `Queue ${params.queue} not found`);
    const { rows: partitions } = await ctx.db.query<{ id: string; name: string }>(
      'select id, name from queen.partitions where queue_id = $1 order by name limit 1000',
      [queues[0].id],
    );
    let partition = query.partition === undefined ? partitions[0] : partitions.find((p) => p.name === query.partition);
    if (!partition && query.partition !== undefined) {
      // Past the first 1000 names: look it up directly.
      const { rows } = await ctx.db.query<{ id: string; name: string }>('select id, name from queen.partitions where queue_id = $1 and name = $2', [queues[0].id, query.partition]);
      partition = rows[0];
      if (!partition) throw new QueenError('PARTITION_NOT_FOUND', `Partition ${query.partition} of queue ${params.queue} not found`);
    }
    if (!partition) {
      return { queue: params.queue, partition: 'Default', partitionId: '', partitions: [], queueModeCursor: '0', messages: [], nextBefore: null };
    }
    const { rows: cursor } = await ctx.db.query<{ c: string }>(
      `select cursor_offset::text as c from queen.cursors where partition_id = $1 and consumer_group = '__QUEUE_MODE__'`,
      [partition.id],
    );
    const queueModeCursor = cursor[0]?.c ?? '0';
    const { rows } = await ctx.db.query<MessageRow>(
      `select m.id, coalesce(m.transaction_id, m.id::text) as "transactionId", m.msg_offset::text as offset,
              queen.iso(m.created_at) as "createdAt", m.trace_id as "traceId", m.producer_sub as "producerSub",
              m.payload, m.encrypted
         from queen.messages m
        where m.partition_id = $1 and ($2::bigint is null or m.msg_offset < $2::bigint)
        order by m.msg_offset desc limit $3`,
      [partition.id, query.before ?? null, query.limit + 1],
    );
    const page = rows.slice(0, query.limit);
    return {
      queue: params.queue,
      partition: partition.name,
      partitionId: partition.id,
      partitions: partitions.map((p) => p.name),
      queueModeCursor,
      messages: page.map((m) => ({
        id: m.id,
        transactionId: m.transactionId,
        offset: m.offset,
        createdAt: m.createdAt,
        traceId: m.traceId,
        producerSub: m.producerSub,
        data: readPayload(ctx, { payload: m.payload, encrypted: m.encrypted, id: m.id }),
        encrypted: m.encrypted !== null,
        acked: BigInt(m.offset) <= BigInt(queueModeCursor),
      })),
      nextBefore: rows.length > query.limit ? page[page.length - 1]!.offset : null,
    };
  });
}
