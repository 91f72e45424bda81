import type { Queen } from '@queen-mq/client';
import { routePath, type RouteSpec } from '@queen-mq/protocol';
import type { QueryValue } from '@queen-mq/client';

/**
 * One call to a route of the protocol table: the path comes from the table
 * (`routePath`), never written here. GETs are retried like any idempotent
 * call (unless `idempotent: false`); writes only when the connection failed
 * before sending.
 */
export function call<T = any>(
  queen: Queen,
  spec: RouteSpec,
  input: { params?: Record<string, string>; query?: Record<string, QueryValue>; body?: unknown; signal?: AbortSignal; idempotent?: boolean } = {},
): Promise<T> {
  return queen.request<T>(spec.method, routePath(spec, input.params), {
    query: input.query,
    body: input.body,
    idempotent: input.idempotent ?? spec.method === 'GET',
    signal: input.signal,
  });
}

/** Page size for the paged listings (the route's default). */
export const PAGE = 1000;

/** Every item of a listing paged with `limit`/`offset`: pages until one comes back short. */
export async function allPages<T>(fetchPage: (query: { limit: number; offset: number }) => Promise<T[]>): Promise<T[]> {
  const out: T[] = [];
  for (let offset = 0; ; offset += PAGE) {
    const page = await fetchPage({ limit: PAGE, offset });
    out.push(...page);
    if (page.length < PAGE) return out;
  }
}
