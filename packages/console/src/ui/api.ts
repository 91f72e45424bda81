import type { AccessLevel, adminRoutes, consoleRoutes, historyRoutes, kvRoutes, routes, scheduleRoutes, streamRoutes, z } from '@queen-mq/protocol';
import { routePath } from '@queen-mq/protocol/paths';

/** One route of the protocol table as build.mjs baked it in: the page writes no URL or level itself. */
interface RouteRef {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  url: string;
  level: AccessLevel;
}

type RouteTable = typeof routes & typeof adminRoutes & typeof streamRoutes & typeof kvRoutes & typeof consoleRoutes & typeof scheduleRoutes & typeof historyRoutes;
type RouteName = keyof RouteTable;

/** What route `N` answers: its response schema's output, as the protocol writes it (never restated here). */
type Answer<N extends RouteName> = RouteTable[N] extends { response: infer R extends z.ZodType } ? z.output<R> : unknown;

declare const QUEEN_ROUTES: Record<RouteName, RouteRef>;
const ROUTES = QUEEN_ROUTES;

/** A non-2xx answer: the broker's `{error, code}` body. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

const TOKEN_KEY = 'queen.console.token';

/** The bearer token the operator entered; kept for this tab only. */
export function getToken(): string {
  return sessionStorage.getItem(TOKEN_KEY) ?? '';
}

export function setToken(token: string): void {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

interface CallOptions {
  params?: Record<string, string>;
  query?: Record<string, string | number | undefined>;
  body?: unknown;
}

/** Calls a route of the table by name, its answer typed by the route's response schema; throws ApiError on a non-2xx. */
export async function call<N extends RouteName>(name: N, options: CallOptions = {}): Promise<Answer<N>> {
  const spec = ROUTES[name];
  const search = new URLSearchParams();
  for (const [k, v] of Object.entries(options.query ?? {})) if (v !== undefined && v !== '') search.set(k, String(v));
  const url = routePath(spec, options.params) + (search.size ? `?${search}` : '');
  const headers: Record<string, string> = {};
  const token = getToken();
  if (token) headers.authorization = `Bearer ${token}`;
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(url, { method: spec.method, headers, body: options.body === undefined ? undefined : JSON.stringify(options.body) });
  const text = await res.text();
  const body = text ? JSON.parse(text) : undefined;
  if (!res.ok) throw new ApiError(res.status, body?.code ?? 'HTTP_' + res.status, body?.error ?? res.statusText);
  return body as Answer<N>;
}

const rank: Record<AccessLevel, number> = { public: 0, 'read-only': 1, 'read-write': 2, admin: 3 };

/** True when a caller of `level` may call the route (the broker decides; this only hides what would be refused). */
export function can(level: AccessLevel, name: RouteName): boolean {
  return rank[level] >= rank[ROUTES[name].level];
}
