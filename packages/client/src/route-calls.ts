import { adminRoutes, consoleRoutes, historyRoutes, kvRoutes, routePath, routes, scheduleRoutes, streamRoutes, type RouteSpec, type z } from '@queen-mq/protocol';
import type { QueryValue, RequestOptions } from './transport.js';

// Typed calls for every route of the protocol's route table: the client
// names a route (`queen.api.streamsCycle({ body })`), never its URL, and its
// params, query, body and answer are typed by the route's own schemas.

/** Every route the broker serves, by name (the protocol's tables, merged). */
export const routeTable = { ...routes, ...adminRoutes, ...streamRoutes, ...kvRoutes, ...consoleRoutes, ...scheduleRoutes, ...historyRoutes };

export type RouteTable = typeof routeTable;
export type RouteCallName = keyof RouteTable;

/** What one call of route `S` takes: its path params, query and body as the route's schemas accept them. */
export type RouteInput<S> = (S extends { params: infer P extends z.ZodType } ? { params: z.input<P> } : { params?: undefined }) &
  // A query string is text on the wire (the schema parses strings): its keys are checked, a value may be any scalar.
  (S extends { query: infer Q extends z.ZodType } ? { query?: { [K in keyof z.input<Q>]?: QueryValue } } : { query?: undefined }) &
  (S extends { body: infer B extends z.ZodType } ? { body: z.input<B> } : { body?: undefined }) &
  Pick<RequestOptions, 'signal' | 'timeoutMs'> & {
    /** Safe to resend (see RequestOptions.idempotent). Default: true for GET, false otherwise. */
    idempotent?: boolean;
  };

/** What route `S` answers (its response schema's output; `unknown` for a route without one). */
export type RouteOutput<S> = S extends { response: infer R extends z.ZodType } ? z.output<R> : unknown;

/** One typed function per route. */
export type RouteCalls = {
  [N in RouteCallName]: {} extends RouteInput<RouteTable[N]>
    ? (input?: RouteInput<RouteTable[N]>) => Promise<RouteOutput<RouteTable[N]>>
    : (input: RouteInput<RouteTable[N]>) => Promise<RouteOutput<RouteTable[N]>>;
};

/** Sends one request; the Queen client's `request`. */
type Send = <T>(method: string, path: string, options: RequestOptions) => Promise<T>;

/** Calls one route by its spec. */
export function callRoute<S extends RouteSpec>(send: Send, spec: S, input: RouteInput<S> = {} as RouteInput<S>): Promise<RouteOutput<S>> {
  const { params, query, body, signal, timeoutMs, idempotent } = input as RouteInput<RouteSpec> & { params?: Record<string, unknown>; query?: Record<string, QueryValue>; body?: unknown };
  return send<RouteOutput<S>>(spec.method, routePath(spec, params), {
    ...(query !== undefined ? { query } : {}),
    ...(body !== undefined ? { body } : {}),
    idempotent: idempotent ?? spec.method === 'GET',
    ...(signal ? { signal } : {}),
    ...(timeoutMs !== undefined ? { timeoutMs } : {}),
  });
}

/** The typed calls of every route, over `send`. */
export function routeCalls(send: Send): RouteCalls {
  const calls: Record<string, (input?: unknown) => Promise<unknown>> = {};
  for (const [name, spec] of Object.entries(routeTable)) calls[name] = (input) => callRoute(send, spec as RouteSpec, input as never);
  return Object.freeze(calls) as unknown as RouteCalls;
}
