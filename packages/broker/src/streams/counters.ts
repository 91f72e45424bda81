import type { FastifyInstance } from 'fastify';
import { consoleRoutes } from '@queen-mq/protocol';
import type { BrokerContext } from '../context/context.js';
import { registerRoute } from '../http/http.js';
import { namedStreamCounts } from '../metrics/stream-counters.js';

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** What this broker counted per stream query since it started (the console's streams page). */
export function streamCounterRoutes(app: FastifyInstance, ctx: BrokerContext): void {
  registerRoute(app, consoleRoutes.streamsCounters, async () => {
    const queries = await namedStreamCounts(ctx.db, ctx.metrics.streamQueries);
    return {
      since: new Date(ctx.metrics.streamQueries.since).toISOString(),
      queries: queries.map((q) => ({
        query_id: q.queryId,
        name: q.name,
        cycles: q.cycles,
        flushes: q.flushes,
        emitted: q.emitted,
        duplicates: q.duplicates,
        errors: q.errors,
        last_cycle_at: iso(q.lastCycleAt),
        last_error_at: iso(q.lastErrorAt),
        last_error_code: q.lastErrorCode,
      })),
    };
  });
}
