import type { FastifyInstance, FastifyReply } from 'fastify';
import { allRoutes, buildOpenApi, QueenError, routes, type RouteSpec } from '@queen-mq/protocol';
import type { BrokerContext } from '../context/context.js';
import { registerRoute } from './http.js';

/** Every route any composed plugin registered, for /openapi.json. */
const routeCatalogue: Record<string, RouteSpec> = allRoutes;

/**
 * A readiness probe must answer while PostgreSQL is gone, however it is gone:
 * a refused connection fails at once, but a host that swallows packets would
 * otherwise hold the probe for the pool's whole connect timeout.
 */
const READY_TIMEOUT_MS = 2000;

function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  work.catch(() => undefined); // a late failure after the timeout is not unhandled
  return Promise.race([work, expired]).finally(() => clearTimeout(timer));
}

/**
 * How long one database probe answers /ready. Probes come from every load
 * balancer and orchestrator, and anyone may send them (the route is public):
 * one round trip a second, however many ask.
 */
const READY_CACHE_MS = 1000;

interface Readiness {
  connected: boolean;
  schemaVersion: number | null;
}

export function opsRoutes(app: FastifyInstance, ctx: BrokerContext): void {
  const probe = async (): Promise<Readiness> => {
    try {
      const { rows } = await withTimeout(
        ctx.db.query<{ version: number }>(`select version from queen.schema_version where owner = 'broker'`),
        READY_TIMEOUT_MS,
      );
      return { connected: true, schemaVersion: rows[0]?.version ?? null };
    } catch {
      ctx.db.connected = false;
      return { connected: false, schemaVersion: null };
    }
  };
  // Started at `at`; callers within READY_CACHE_MS of that share it, even while it runs.
  let last: { at: number; result: Promise<Readiness> } | undefined;
  const readiness = () => {
    const now = Date.now();
    if (!last || now - last.at >= READY_CACHE_MS) last = { at: now, result: probe() };
    return last.result;
  };

  registerRoute(app, routes.health, async () => ({
    status: 'healthy' as const,
    database: ctx.db.connected ? ('connected' as const) : ('disconnected' as const),
    version: ctx.version,
    uptimeSeconds: Math.round((Date.now() - ctx.startedAt) / 1000),
  }));

  registerRoute(app, routes.ready, async ({ reply }) => {
    const { connected, schemaVersion } = await readiness();
    const ready = connected && schemaVersion === ctx.expectedSchemaVersion;
    const body = { ready, database: connected ? 'connected' : 'disconnected', schemaVersion, expectedSchemaVersion: ctx.expectedSchemaVersion };
    if (!ready) return reply.code(503).send({ ...body, ...new QueenError('NOT_READY').toBody() });
    return body;
  });

  // Only what this broker serves: features composed in by the deployable (the
  // KV, ...) are in the catalogue but not on every broker.
  let document: unknown;
  registerRoute(app, routes.openapi, async () => {
    document ??= buildOpenApi(
      Object.fromEntries(Object.entries(routeCatalogue).filter(([, r]) => app.hasRoute({ method: r.method, url: r.url }))),
      { title: 'Queen', version: ctx.version },
    );
    return document;
  });
}

/**
 * `/metrics` and its alias, plus the request counter and duration histogram
 * (an onResponse hook; routes are labelled by their pattern, never by the raw
 * URL, so label cardinality stays bounded).
 */
export function metricsRoutes(app: FastifyInstance, ctx: BrokerContext): void {
  const m = ctx.metrics;
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? 'unmatched';
    m.httpRequests.inc({ route, method: request.method, status: String(reply.statusCode) });
    m.httpDuration.observe({ route }, reply.elapsedTime / 1000);
  });
  const handler = async ({ reply }: { reply: FastifyReply }) => {
    const text = await m.registry.metrics();
    reply.header('content-type', m.registry.contentType);
    return text;
  };
  registerRoute(app, routes.metrics, handler);
  registerRoute(app, routes.metricsAlias, handler);
}
