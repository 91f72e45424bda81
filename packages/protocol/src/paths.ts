import type { RouteSpec } from './routes.js';

/**
 * The concrete path of a route of the table: each `:name` segment of
 * `spec.url` replaced by `params[name]`, percent-encoded (a partition or KV key
 * may hold `/`). Clients build URLs with it instead of writing them again.
 * Throws a TypeError when a parameter is missing.
 */
export function routePath(spec: Pick<RouteSpec, 'url'>, params: Record<string, string> = {}): string {
  return spec.url.replace(/:([A-Za-z]+)/g, (_m, name: string) => {
    const value = params[name];
    if (value === undefined) throw new TypeError(`routePath(${spec.url}): missing parameter "${name}"`);
    return encodeURIComponent(value);
  });
}
