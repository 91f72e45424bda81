import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from "fastify";
import { QueenError } from '@queen-mq/protocol';
import { ackRoutes } from './log/ack.js';
import { registerAuth } from './http/auth.js';
import { MAX_JSON_DEPTH, isJsonBody, nestsDeeperThan, unstorableFields } from './http/http.js';
import { registerOriginGuards } from './http/origin.js';
import { requestLogger } from './http/request-logger.js';
import { discardBound, keepForUnreadBody } from './http/unread-body.js';
import type { BrokerContext } from './context/context.js';
import { groupRoutes } from './admin/groups.js';
import { configureRoutes } from './admin/configure.js';
import { queueDeleteRoutes } from './admin/queue-delete.js';
import { consumerGroupRoutes } from './admin/consumer-groups.js';
import { seekRoutes } from './admin/seek.js';
import { dlqRoutes } from './admin/dlq.js';
import { transactionRoutes } from './log/transaction.js';
import { maintenanceRoutes } from './admin/maintenance.js';
import { leaseRoutes } from './log/lease.js';
import { metricsRoutes, opsRoutes } from './http/ops.js';
import { popRoutes } from './log/pop.js';
import { pushRoutes } from './log/push.js';
import { queueRoutes } from './admin/queues.js';
import { streamCycleRoutes } from './streams/cycle.js';
import { streamQueryRoutes } from './streams/queries.js';
import { streamMigrationRoutes } from './streams/migrations.js';
import { streamStateRoutes } from './streams/state.js';
import { consoleApiRoutes } from './admin/console.js';
import { historyApiRoutes } from './admin/history.js';
import { scheduleRouteHandlers } from './admin/schedules.js';
import { streamInspectRoutes } from './streams/inspect.js';
import { streamCounterRoutes } from './streams/counters.js';

/** A broker feature: registers its routes (and hooks) on the app. */
export type BrokerPlugin = (app: FastifyInstance, ctx: BrokerContext) => void | Promise<void>;

const coreRoutes: BrokerPlugin[] = [metricsRoutes, opsRoutes, pushRoutes, popRoutes, ackRoutes, leaseRoutes, queueRoutes, groupRoutes, configureRoutes, queueDeleteRoutes, consumerGroupRoutes, seekRoutes, dlqRoutes, transactionRoutes, maintenanceRoutes, streamQueryRoutes, streamMigrationRoutes, streamCycleRoutes, streamStateRoutes, streamInspectRoutes, streamCounterRoutes, consoleApiRoutes, historyApiRoutes, scheduleRouteHandlers];

/**
 * The fastify app: JSON everywhere, the request pipeline of PROTOCOL §1.2
 * (route → origin/Host → auth → content type → size → JSON → schema →
 * handler), CORS when configured, and the error catalogue mapping.
 * Features arrive as plugins so the KV can be composed in by apps/broker
 * without the broker importing it.
 */
export async function buildApp(ctx: BrokerContext, plugins: BrokerPlugin[] = []): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: ctx.log as unknown as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    // A request's pino child is made only when the request logs (request-logger.ts).
    childLoggerFactory: requestLogger,
    bodyLimit: ctx.config.maxBodyBytes,
    // KV keys (512 chars) and partition names (255) arrive percent-encoded: up to 12 bytes a char.
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 8192 },
    return503OnClosing: false,
    // fastify would answer HEAD on every GET route by running its handler:
    // a HEAD on pop would lease (or auto-ack) messages and drop them.
    exposeHeadRoutes: false,
    // A client that trickles its headers or body holds a socket and a slot
    // of maxConnections; 0 turns the limit off. Node reads the limit for a
    // body only from the server's constructor options (fastify sets it
    // afterwards, which bounds headers alone), and checks on a timer whose
    // default period (30 s) would stretch a short limit.
    requestTimeout: ctx.config.requestTimeoutMs,
    http: { requestTimeout: ctx.config.requestTimeoutMs, connectionsCheckingInterval: Math.min(1000, ctx.config.requestTimeoutMs || 30000) },
  });
  // Past the limit Node closes a new connection on accept, before it costs a
  // parser or a request. 0 = unlimited (Node's 0 would refuse every one).
  if (ctx.config.maxConnections > 0) app.server.maxConnections = ctx.config.maxConnections;

  // Bodies are JSON: an empty one reads as {}, and the content type was
  // checked before the body was read (preParsing hook below).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, (_req, body, done) => {
    const text = String(body);
    if (text.trim() === '') return done(null, {});
    if (nestsDeeperThan(text, MAX_JSON_DEPTH)) {
      return done(new QueenError('VALIDATION_FAILED', `Body nests deeper than ${MAX_JSON_DEPTH} levels`, {
        details: [{ field: 'body', message: `must not nest deeper than ${MAX_JSON_DEPTH} levels` }],
      }), undefined);
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      return done(new QueenError('INVALID_JSON', 'Request body is not valid JSON'), undefined);
    }
    const details = unstorableFields(text, parsed);
    if (details.length) return done(new QueenError('VALIDATION_FAILED', 'Body holds text PostgreSQL cannot store', { details }), undefined);
    done(null, parsed);
  });

  registerOriginGuards(app, ctx.config);
  // Answers sent while shutting down (parked pops get 204) close their
  // keep-alive connection, else the server's close waits for the client.
  // An answer sent before the body was read (413, 401, 415, ...) keeps it
  // until the client can have read the answer.
  const unreadBodyBound = discardBound(ctx.config.maxBodyBytes);
  app.addHook('onSend', async (request, reply) => {
    if (ctx.shutdown.aborted) reply.header('Connection', 'close');
    else if (!request.raw.complete) keepForUnreadBody(request.raw, reply, unreadBodyBound);
  });
  registerAuth(app, ctx.config);
  // After auth (a caller without rights learns nothing about bodies), before
  // the body is read. Only JSON may carry a body: a cross-site page can send
  // text/plain, form and bodies without a type with no preflight, and those
  // must never reach a handler.
  app.addHook('preParsing', async (request, _reply, payload) => {
    if (!request.is404 && !isJsonBody(request.method, request.headers)) throw new QueenError('UNSUPPORTED_MEDIA_TYPE');
    return payload;
  });

  app.setNotFoundHandler(async (req, reply) => {
    reply.code(404).send(new QueenError('ROUTE_NOT_FOUND', `No route for ${req.method} ${req.url.split('?')[0]}`).toBody());
  });

  app.setErrorHandler(async (err, req, reply) => {
    const error = ctx.db.translate(err);
    if (error instanceof QueenError) {
      // QUEUE_FULL on any write path: the producer is told when to try again.
      if (typeof error.extra?.retryAfter === 'number') reply.header('Retry-After', String(error.extra.retryAfter));
      return reply.code(error.status).send(error.toBody());
    }
    const e = err as { code?: string; statusCode?: number; message?: string };
    if (e.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return reply.code(413).send(new QueenError('PAYLOAD_TOO_LARGE').toBody());
    // A Content-Type that names JSON but does not parse as a media type.
    if (e.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') return reply.code(415).send(new QueenError('UNSUPPORTED_MEDIA_TYPE').toBody());
    if (e.statusCode && e.statusCode >= 400 && e.statusCode < 500) {
      // A malformed request fastify itself rejected (bad encoding, bad URL): the client's fault, never a 500.
      return reply.code(400).send(new QueenError('VALIDATION_FAILED', e.message ?? 'Bad request').toBody());
    }
    req.log.error({ err }, 'unhandled error');
    return reply.code(500).send(new QueenError('INTERNAL_ERROR').toBody());
  });

  for (const plugin of [...coreRoutes, ...plugins]) await plugin(app, ctx);
  return app;
}
