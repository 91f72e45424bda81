import { z } from 'zod';
import { ackBatchBody, ackBody, ackResponse } from './ack.js';
import { adminRoutes } from './admin.js';
import { leaseExtendBody, leaseExtendParams, leaseExtendResponse } from './lease.js';
import { kvRoutes } from './kv.js';
import { consoleRoutes } from './console.js';
import { historyRoutes } from './history.js';
import { healthResponse, readyResponse } from './ops.js';
import { popPartitionParams, popQuery, popQueueParams, popResponse } from './pop.js';
import { pushBody, pushResponse } from './push.js';
import { groupDetailResponse, queueDetailResponse, queueListResponse } from './resources.js';
import { scheduleRoutes } from './schedules.js';
import { streamRoutes } from './streams.js';
import { listPageQuery, listSearchQuery, name255, queryInt, queueName } from './values.js';

/** Access levels nest: admin ⊇ read-write ⊇ read-only. */
export type AccessLevel = 'public' | 'read-only' | 'read-write' | 'admin';

/**
 * One route of PROTOCOL §2. The broker validates params, query and body with
 * these schemas before its handler runs, and `/openapi.json` is generated
 * from the same objects, so a request shape is written once.
 */
export interface RouteSpec {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  url: string;
  level: AccessLevel;
  summary: string;
  params?: z.ZodType;
  query?: z.ZodType;
  body?: z.ZodType;
  response?: z.ZodType;
  /** HTTP status of a success answer (200 unless stated). */
  successStatus?: number;
}

function route<const S extends RouteSpec>(spec: S): S {
  return spec;
}

export const queueParams = z.object({ queue: queueName });
export const groupParams = z.object({ group: name255 });

export const routes = {
  health: route({ method: 'GET', url: '/health', level: 'public', summary: 'Liveness; no database round trip', response: healthResponse }),
  ready: route({ method: 'GET', url: '/ready', level: 'public', summary: 'Readiness: database answers and schema version matches', response: readyResponse }),
  metrics: route({ method: 'GET', url: '/metrics', level: 'read-only', summary: 'Prometheus metrics' }),
  metricsAlias: route({ method: 'GET', url: '/metrics/prometheus', level: 'read-only', summary: 'Prometheus metrics (alias)' }),
  openapi: route({ method: 'GET', url: '/openapi.json', level: 'read-only', summary: 'This API as OpenAPI 3.1' }),
  push: route({ method: 'POST', url: '/api/v1/push', level: 'read-write', summary: 'Append messages', body: pushBody, response: pushResponse, successStatus: 201 }),
  popQueue: route({ method: 'GET', url: '/api/v1/pop/queue/:queue', level: 'read-write', summary: 'Lease messages from any partitions of a queue', params: popQueueParams, query: popQuery(), response: popResponse }),
  popPartition: route({ method: 'GET', url: '/api/v1/pop/queue/:queue/partition/:partition', level: 'read-write', summary: 'Lease messages from one partition', params: popPartitionParams, query: popQuery(), response: popResponse }),
  ack: route({ method: 'POST', url: '/api/v1/ack', level: 'read-write', summary: 'Acknowledge one message', body: ackBody, response: ackResponse }),
  ackBatch: route({ method: 'POST', url: '/api/v1/ack/batch', level: 'read-write', summary: 'Acknowledge many messages', body: ackBatchBody, response: ackResponse }),
  leaseExtend: route({ method: 'POST', url: '/api/v1/lease/:leaseId/extend', level: 'read-write', summary: 'Extend a live lease', params: leaseExtendParams, body: leaseExtendBody, response: leaseExtendResponse }),
  queueList: route({ method: 'GET', url: '/api/v1/resources/queues', level: 'read-only', summary: 'List queues (paged: limit, offset; search by name)', query: listSearchQuery, response: queueListResponse }),
  queueGet: route({ method: 'GET', url: '/api/v1/resources/queues/:queue', level: 'read-only', summary: 'Queue detail with partitions and offsets (partitions paged: limit, offset)', params: queueParams, query: listPageQuery, response: queueDetailResponse }),
  groupGet: route({
    method: 'GET',
    url: '/api/v1/consumer-groups/:group',
    level: 'read-only',
    summary: 'Consumer group detail: cursors, lag, leases (partitions pageable: limit, offset; every partition without limit, as in v1)',
    params: groupParams,
    query: z.object({ queue: queueName.optional(), limit: queryInt(1, 2147483647).optional(), offset: queryInt(0, 2147483647).default(0) }),
    response: groupDetailResponse,
  }),
} satisfies Record<string, RouteSpec>;

export type RouteName = keyof typeof routes;

/**
 * Every route of every feature, for /openapi.json. Each feature's protocol
 * file exports its own table; add it here with one line.
 */
export const allRoutes: Record<string, RouteSpec> = {
  ...routes,
  ...adminRoutes,
  ...streamRoutes,
  ...kvRoutes,
  ...consoleRoutes,
  ...historyRoutes,
  ...scheduleRoutes,
};
