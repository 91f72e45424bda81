import type { FastifyInstance } from 'fastify';
import { adminRoutes } from '@queen-mq/protocol';
import type { BrokerContext } from '../context/context.js';
import { forgetEncryptionFlags } from '../log/encryption.js';
import { registerRoute } from '../http/http.js';

/**
 * DELETE /api/v1/resources/queues/:queue (PROTOCOL §5.2): partitions,
 * messages, segments, cursors, leases, failure records, DLQ entries,
 * subscriptions (fix: they used to leak into a re-created queue) and pending
 * timers, in one transaction (queen.log_delete_queue_v1). Idempotent. Stream
 * queries and their state are untouched.
 */
async function deleteQueue(ctx: BrokerContext, queue: string): Promise<boolean> {
  const { rows } = await ctx.db.query<{ existed: boolean }>('select queen.log_delete_queue_v1($1) as existed', [queue]);
  // This broker's cached partition ids are stale now; other brokers find out
  // on their next push (the allocator raises, the push retries).
  ctx.partitions.forget(queue);
  forgetEncryptionFlags(ctx, queue);
  return rows[0]!.existed;
}

export function queueDeleteRoutes(app: FastifyInstance, ctx: BrokerContext): void {
  registerRoute(app, adminRoutes.queueDelete, async ({ params }) => ({
    deleted: true as const,
    queue: params.queue,
    existed: await deleteQueue(ctx, params.queue),
  }));
}
