import type { FastifyInstance } from 'fastify';
import { errorMessage, isErrorCode, routes } from '@queen-mq/protocol';
import type { BrokerContext } from '../context/context.js';
import { registerRoute } from '../http/http.js';

export function leaseRoutes(app: FastifyInstance, ctx: BrokerContext): void {
  registerRoute(app, routes.leaseExtend, async ({ params, body }) => {
    const { rows } = await ctx.db.query<{ r: { success: boolean; code?: string; expiresAt?: string } }>(
      'select queen.log_extend_lease_v1($1, $2) as r',
      [params.leaseId, body.seconds],
    );
    const r = rows[0]!.r;
    // SQL answers the code; the text is the catalogue's.
    const error = isErrorCode(r.code) ? errorMessage(r.code) : null;
    return [{ index: 0, leaseId: params.leaseId, success: r.success, error, code: r.code ?? null, expiresAt: r.expiresAt ?? null }];
  });
}
