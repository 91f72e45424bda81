import type { FastifyInstance, FastifyReply } from 'fastify';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { routes } from '@queen-mq/protocol';
import type { BrokerContext } from './context.js';
import { registerRoute } from './http.js';

/**
 * The Prometheus series of one broker (PROTOCOL §5.10). Each broker owns its
 * own registry, never prom-client's global one, so several brokers in one
 * process (tests, embedded use) keep separate counts. Other features may add
 * their series to `registry`.
 */
export interface BrokerMetrics {
  registry: Registry;
  httpRequests: Counter<'route' | 'method' | 'status'>;
  httpDuration: Histogram<'route'>;
  pushed: Counter<'queue'>;
  duplicates: Counter<'queue'>;
  delivered: Counter<'queue'>;
  acked: Counter<'queue' | 'status'>;
  deadLettered: Counter<'queue'>;
  leaseExpired: Counter<'queue'>;
  longPollWaiting: Gauge;
}

const byContext = new WeakMap<BrokerContext, BrokerMetrics>();

function createMetrics(ctx: BrokerContext): BrokerMetrics {
  const registry = new Registry();
  const registers = [registry];
  const pool = ctx.db.pool;
  new Gauge({
    name: 'queen_db_pool_connections',
    help: 'PostgreSQL pool connections by state (total, idle, active, waiting requests)',
    labelNames: ['state'],
    registers,
    collect() {
      this.set({ state: 'total' }, pool.totalCount);
      this.set({ state: 'idle' }, pool.idleCount);
      this.set({ state: 'active' }, pool.totalCount - pool.idleCount);
      this.set({ state: 'waiting' }, pool.waitingCount);
    },
  });
  return {
    registry,
    httpRequests: new Counter({ name: 'queen_http_requests_total', help: 'HTTP requests answered', labelNames: ['route', 'method', 'status'], registers }),
    httpDuration: new Histogram({
      name: 'queen_http_request_duration_seconds',
      help: 'HTTP request duration by route (long-polls included)',
      labelNames: ['route'],
      // Up to the longest long-poll a pop may park (QUEEN_MAX_POP_TIMEOUT_MS).
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
      registers,
    }),
    pushed: new Counter({ name: 'queen_messages_pushed_total', help: 'Messages appended (status queued)', labelNames: ['queue'], registers }),
    duplicates: new Counter({ name: 'queen_messages_duplicate_total', help: 'Pushed items answered duplicate', labelNames: ['queue'], registers }),
    delivered: new Counter({ name: 'queen_messages_delivered_total', help: 'Messages returned by pops', labelNames: ['queue'], registers }),
    acked: new Counter({ name: 'queen_messages_acked_total', help: 'Ack items applied, by status', labelNames: ['queue', 'status'], registers }),
    deadLettered: new Counter({ name: 'queen_dlq_messages_total', help: 'Messages dead-lettered by acks', labelNames: ['queue'], registers }),
    leaseExpired: new Counter({ name: 'queen_lease_expired_total', help: 'Expired leases found and released by pops', labelNames: ['queue'], registers }),
    longPollWaiting: new Gauge({ name: 'queen_long_poll_waiting', help: 'Pops parked in a long-poll right now', registers }),
  };
}

/** The metrics of one broker, created on first use. A WeakMap lookup: cheap on the hot path. */
export function metricsOf(ctx: BrokerContext): BrokerMetrics {
  let m = byContext.get(ctx);
  if (!m) {
    m = createMetrics(ctx);
    byContext.set(ctx, m);
  }
  return m;
}

/** Adds `n` per key of a small tally (one counter update per queue, not per message). */
export function tally<K extends string>(counts: Map<K, number>, key: K, n = 1): void {
  counts.set(key, (counts.get(key) ?? 0) + n);
}

/**
 * `/metrics` and its alias, plus the request counter and duration histogram
 * (an onResponse hook; routes are labelled by their pattern, never by the raw
 * URL, so label cardinality stays bounded).
 */
export function metricsRoutes(app: FastifyInstance, ctx: BrokerContext): void {
  const m = metricsOf(ctx);
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
