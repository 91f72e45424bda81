import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { QueenError, absentNulls, fieldPath, issuesToDetails, type FieldIssue, type RouteSpec } from '@queen-mq/protocol';
import type { z } from 'zod';

/** What a handler receives: the validated (and defaulted) params, query and body. */
export interface Input<P = any, Q = any, B = any> {
  params: P;
  query: Q;
  body: B;
  request: FastifyRequest;
  reply: FastifyReply;
}

type Out<S> = S extends z.ZodType ? z.output<S> : undefined;

/**
 * Registers a route of the protocol table. Params, query and body are checked
 * before the handler runs, every offending field reported at once
 * (PROTOCOL §1.2 step 5), so a 400 never touches the database. A `null` in
 * an optional field reads as absent (§1.1), as Queen's own clients send it.
 *
 * The wrapper is not an async function: a handler that answers later through
 * `reply` (a parked pop) returns nothing, and nothing of the wrapper stays
 * alive meanwhile. A throw here (a 400) reaches fastify's error path as a
 * rejection would.
 */
export function registerRoute<S extends RouteSpec>(
  app: FastifyInstance,
  spec: S,
  handler: (input: Input<Out<S['params']>, Out<S['query']>, Out<S['body']>>) => Promise<unknown> | void,
): void {
  const queryNulls = spec.query ? absentNulls(spec.query, 'query') : undefined;
  const bodyNulls = spec.body ? absentNulls(spec.body, 'body') : undefined;
  const successStatus = spec.successStatus;
  app.route({
    method: spec.method,
    url: spec.url,
    config: { level: spec.level },
    handler: (request, reply) => {
      const details: FieldIssue[] = [];
      const parse = (schema: z.ZodType | undefined, value: unknown, prefix: string) => {
        if (!schema) return undefined;
        // Only an absent body reads as {}: JSON null is a body that is not an object (400).
        const result = schema.safeParse(value === undefined ? {} : value);
        if (!result.success) {
          details.push(...issuesToDetails(prefix, result.error));
          return undefined;
        }
        return result.data;
      };
      const params = parse(spec.params, request.params, 'params');
      const query = parse(spec.query, queryNulls ? queryNulls(request.query) : request.query, 'query');
      const rawBody = request.body === undefined ? {} : request.body;
      const body = parse(spec.body, bodyNulls ? bodyNulls(rawBody) : rawBody, 'body');
      if (details.length) throw new QueenError('VALIDATION_FAILED', `Invalid request: ${details.map((d) => `${d.field} ${d.message}`).join('; ')}`, { details });
      const out = handler({ params, query, body, request, reply } as Input<any, any, any>);
      if (!successStatus || !out) return out;
      return out.then((value) => {
        if (!reply.sent) reply.code(successStatus);
        return value;
      });
    },
  });
}

const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
/** application/json and the structured-syntax suffix types (application/problem+json, ...), any parameters. */
const JSON_MEDIA_TYPE = /^application\/(?:[a-z0-9!#$&^_.-]+\+)?json$/;

/**
 * False when a request may carry a body that is not JSON (PROTOCOL §1.1):
 * on a body method, a Content-Type other than JSON, or a body without one.
 * A body-less request needs no Content-Type; GET bodies are never read.
 */
export function isJsonBody(method: string, headers: { 'content-type'?: string; 'content-length'?: string; 'transfer-encoding'?: string }): boolean {
  if (!BODY_METHODS.has(method)) return true;
  const type = headers['content-type'];
  if (type === undefined) {
    const length = headers['content-length'];
    return headers['transfer-encoding'] === undefined && (length === undefined || length === '0');
  }
  const semicolon = type.indexOf(';');
  return JSON_MEDIA_TYPE.test((semicolon === -1 ? type : type.slice(0, semicolon)).trim().toLowerCase());
}

// JSON may carry text that PostgreSQL cannot store: U+0000 (jsonb and text
// reject it) and unpaired UTF-16 surrogates (jsonb rejects their escapes).
// Both can only come from `\u` escapes in the raw text, so the cheap test on
// the text gates the walk, and ordinary bodies never pay for it.
const SUSPECT_ESCAPE = /\\u(0000|[dD][89a-fA-F])/;
const UNSTORABLE = /\u0000|\p{Cs}/u;

/**
 * Body fields whose strings (or object keys) PostgreSQL cannot store, as
 * VALIDATION_FAILED details; empty when the body is storable. Caught here,
 * before any handler, they are a 400 that changes nothing instead of a
 * database error.
 */
export function unstorableFields(raw: string, body: unknown): FieldIssue[] {
  if (!SUSPECT_ESCAPE.test(raw)) return [];
  const out: FieldIssue[] = [];
  const message = 'must not contain U+0000 or unpaired surrogates';
  const walk = (value: unknown, path: (string | number)[]) => {
    if (typeof value === 'string') {
      if (UNSTORABLE.test(value)) out.push({ field: fieldPath('body', path), message });
    } else if (Array.isArray(value)) {
      value.forEach((v, i) => walk(v, [...path, i]));
    } else if (value !== null && typeof value === 'object') {
      for (const [k, v] of Object.entries(value)) {
        // A bad key is reported on its object: the key itself is not printable.
        if (UNSTORABLE.test(k)) out.push({ field: fieldPath('body', path), message: `keys ${message}` });
        else walk(v, [...path, k]);
      }
    }
  };
  walk(body, []);
  return out;
}

/** Deepest JSON nesting a body may have: JSON.stringify and PostgreSQL's jsonb both recurse per level. */
export const MAX_JSON_DEPTH = 1000;

/**
 * True when the JSON text nests arrays/objects deeper than `max`. A body with
 * at most `max` opening brackets cannot, so ordinary requests skip the scan:
 * counting them with indexOf is native and about ten times cheaper than the
 * scan below on a batch-100 push.
 */
export function nestsDeeperThan(text: string, max: number): boolean {
  if (text.length <= max || openingBrackets(text, max) <= max) return false;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92) i++; // backslash: skip the escaped character
      else if (c === 34) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 123 || c === 91) {
      if (++depth > max) return true;
    } else if (c === 125 || c === 93) depth--;
  }
  return false;
}

/** '{' and '[' in the text, strings included, counted up to just past `limit`. */
function openingBrackets(text: string, limit: number): number {
  let n = 0;
  for (const ch of ['{', '[']) {
    for (let i = text.indexOf(ch); i !== -1 && n <= limit; i = text.indexOf(ch, i + 1)) n++;
  }
  return n;
}
