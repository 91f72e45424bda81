import type { FastifyInstance } from 'fastify';
import { routes, type AckItem, type AckResult } from '@queen-mq/protocol';
import type { BrokerContext } from './context.js';
import { registerRoute } from './http.js';

/**
 * Applies acks in one transaction via queen.log_ack_v1: items grouped by
 * (partition, group) in ascending offset order, one item's failure never
 * undoing another's; results in input order.
 */
export async function ackItems(ctx: BrokerContext, group: string, items: AckItem[]): Promise<AckResult[]> {
  const payload = items.map((item, idx) => ({ idx, ...item }));
  const { rows } = await ctx.db.query<{ r: AckResult[] }>('select queen.log_ack_v1($1, $2::jsonb) as r', [group, JSON.stringify(payload)]);
  return rows[0]!.r;
}

export function ackRoutes(app: FastifyInstance, ctx: BrokerContext): void {
  registerRoute(app, routes.ack, async ({ body }) => {
    const { consumerGroup, ...item } = body;
    return ackItems(ctx, consumerGroup, [item]);
  });
  registerRoute(app, routes.ackBatch, async ({ body }) => ackItems(ctx, body.consumerGroup, body.acknowledgments));
}
