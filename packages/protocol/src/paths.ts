import type { RouteSpec } from './routes.js';

/**
 * The concrete path of a route of the table: each `:name` segment of
 * `spec.url` replaced by `params[name]`, percent-encoded (a partition or KV key
 * may hold `/`), e.g. `/api/v1/lease/:leaseId/extend` with `{leaseId: 'x'}` →
 * `/api/v1/lease/x/extend`. The one builder of route URLs: the client, the
 * console and the CLI use it instead of writing paths again. Throws a
 * TypeError when a parameter is missing, null or empty (a request to
 * `/queues//x` would reach another route or none).
 */
export function routePath(spec: Pick<RouteSpec, 'url'>, params?: Record<string, unknown>): string {
  return spec.url.replace(/:([A-Za-z0-9_]+)/g, (_m, name: string) => {
    const value = params?.[name];
    if (value === undefined || value === null || value === '') throw new TypeError(`${spec.url}: path parameter "${name}" is required`);
    return encodeURIComponent(String(value));
  });
}
