import { z } from 'zod';
import { nullableWhereOptional } from './null-as-absent.js';
import type { RouteSpec } from './routes.js';

const errorSchema = {
  type: 'object',
  required: ['error', 'code'],
  properties: {
    error: { type: 'string' },
    code: { type: 'string' },
    details: { type: 'array', items: { type: 'object', properties: { field: { type: 'string' }, message: { type: 'string' } } } },
  },
};

function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  const out = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as Record<string, unknown>;
  delete out.$schema;
  return out;
}

function parameters(where: 'path' | 'query', schema: z.ZodType | undefined) {
  if (!schema) return [];
  const js = jsonSchema(schema, 'input') as { properties?: Record<string, unknown>; required?: string[] };
  return Object.entries(js.properties ?? {}).map(([name, s]) => ({
    name,
    in: where,
    required: where === 'path' || (js.required ?? []).includes(name),
    schema: s,
  }));
}

/** OpenAPI 3.1 for a route table; generated, never hand-written. */
export function buildOpenApi(routeTable: Record<string, RouteSpec>, info: { title: string; version: string }) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const [id, r] of Object.entries(routeTable)) {
    const path = r.url.replace(/:([A-Za-z]+)/g, '{$1}');
    const op: Record<string, unknown> = {
      operationId: id,
      summary: r.summary,
      'x-queen-level': r.level,
      parameters: [...parameters('path', r.params), ...parameters('query', r.query)],
      responses: {
        [String(r.successStatus ?? 200)]: {
          description: 'Success',
          content: { 'application/json': { schema: r.response ? jsonSchema(r.response, 'output') : {} } },
        },
        default: { description: 'Error', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } },
      },
    };
    if (r.body) op.requestBody = { required: false, content: { 'application/json': { schema: nullableWhereOptional(jsonSchema(r.body, 'input')) } } };
    (paths[path] ??= {})[r.method.toLowerCase()] = op;
  }
  return { openapi: '3.1.0', info, paths, components: { schemas: { Error: errorSchema } } };
}
