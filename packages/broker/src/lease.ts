import type { FastifyInstance } from 'fastify';
import { routes } from '@queen-mq/protocol';
import type { BrokerContext } from './context.js';
import { registerRoute } from './http.js';

export function leaseRoutes(app: FastifyInstance, ctx: BrokerContext): void {
  registerRoute(app, routes.leaseExtend, async ({ params, body }) => {
    const { rows } = await ctx.db.query<{ r: { success: boolean; code?: string; error?: string; expiresAt?: string } }>(
      'select queen.log_extend_lease_v1($1, $2) as r',
      [params.leaseId, body.seconds],
    );
    const r = rows[0]!.r;
    return [{ index: 0, leaseId: params.leaseId, success: r.success, error: r.error ?? null, code: r.code ?? null, expiresAt: r.expiresAt ?? null }];
  });
}
