import type { FastifyInstance } from 'fastify';
import { adminRoutes } from '@queen-mq/protocol';
import type { BrokerContext } from '../context/context.js';
import { registerRoute } from '../http/http.js';
import { allMaintenanceTasks, runMaintenance } from '../maintenance/retention.js';

/** The cluster-wide pop pause flag lives in PostgreSQL, so every replica honours it (pop.ts reads it). */
async function popPaused(ctx: BrokerContext): Promise<boolean> {
  const { rows } = await ctx.db.query<{ paused: boolean }>(
    `select coalesce((select (value)::text::boolean from queen.flags where name = 'pop_paused'), false) as paused`,
  );
  return rows[0]!.paused;
}

export function maintenanceRoutes(app: FastifyInstance, ctx: BrokerContext): void {
  registerRoute(app, adminRoutes.maintenanceGet, async () => ({ maintenanceMode: false, popMaintenanceMode: await popPaused(ctx) }));

  registerRoute(app, adminRoutes.maintenancePop, async ({ body }) => {
    await ctx.db.query(
      `insert into queen.flags (name, value) values ('pop_paused', to_jsonb($1::boolean))
       on conflict (name) do update set value = excluded.value`,
      [body.enabled],
    );
    // Parked pops re-check at least every second; resuming wakes this broker's at once.
    if (!body.enabled) ctx.notifier.wakeAll();
    return { popMaintenanceMode: body.enabled };
  });

  registerRoute(app, adminRoutes.maintenanceRun, async ({ body }) => {
    const result = await runMaintenance(ctx, body.tasks ?? allMaintenanceTasks, true);
    return result!;
  });
}
