import type { FastifyInstance } from 'fastify';
import { adminRoutes, QueenError } from '@queen-mq/protocol';
import type { BrokerContext } from '../context/context.js';
import { registerRoute } from '../http/http.js';

const MAX_OFFSET = 9223372036854775807n;

interface SeekTarget {
  offset?: string;
  timestamp?: string;
}

/**
 * Seek (PROTOCOL §5.9) through queen.log_seek_v1: the cursor of (partition,
 * group) moves anywhere, backwards included; the lease ends (its acks then
 * get LEASE_EXPIRED) and failure records are cleared. The queue and partition
 * are resolved first, so an unknown one is a 404 that creates no cursor row.
 */
async function seek(ctx: BrokerContext, group: string, queue: string, partition: string | null, target: SeekTarget) {
  const { rows: found } = await ctx.db.query<{ queue_id: string | null; partition_id: string | null }>(
    `select q.id as queue_id, p.id as partition_id
       from (select 1) one
       left join queen.queues q on q.name = $1
       left join queen.partitions p on p.queue_id = q.id and p.name = $2`,
    [queue, partition],
  );
  const where = found[0]!;
  if (!where.queue_id) throw new QueenError('QUEUE_NOT_FOUND', `Queue ${queue} not found`);
  if (partition !== null && !where.partition_id) throw new QueenError('PARTITION_NOT_FOUND', `Partition ${partition} of queue ${queue} not found`);
  const { rows } = await ctx.db.query<{ partition_id: string; cursor_offset: string }>(
    'select * from queen.log_seek_v1($1, $2, $3, $4::bigint, $5::timestamptz)',
    [group, where.queue_id, where.partition_id, target.offset ?? null, target.timestamp ?? null],
  );
  ctx.totals.touch(rows.map((r) => r.partition_id));
  // A seek back (or a released lease) makes messages deliverable: wake this broker's parked pops.
  ctx.notifier.notify(queue);
  return rows;
}

export function seekRoutes(app: FastifyInstance, ctx: BrokerContext): void {
  registerRoute(app, adminRoutes.seekQueue, async ({ params, body }) => {
    const rows = await seek(ctx, params.group, params.queue, null, { timestamp: body.timestamp });
    return {
      success: true as const,
      consumerGroup: params.group,
      queueName: params.queue,
      seekToEnd: body.toEnd === true,
      targetTimestamp: body.timestamp ?? null,
      partitionsUpdated: rows.length,
    };
  });

  registerRoute(app, adminRoutes.seekPartition, async ({ params, body }) => {
    if (body.offset !== undefined && BigInt(body.offset) > MAX_OFFSET) {
      throw new QueenError('VALIDATION_FAILED', 'offset out of range', { details: [{ field: 'body.offset', message: 'must be a 64-bit offset' }] });
    }
    const rows = await seek(ctx, params.group, params.queue, params.partition, body);
    // The partition was resolved just before; it can only be missing here if it was deleted in between.
    if (!rows[0]) throw new QueenError('PARTITION_NOT_FOUND', `Partition ${params.partition} of queue ${params.queue} not found`);
    return { success: true as const, updated: true as const, cursorMovedTo: rows[0].cursor_offset };
  });
}
