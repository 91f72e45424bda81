import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { QueenError, issuesToDetails, type FieldIssue, type RouteSpec } from '@queen-mq/protocol';
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
 * (PROTOCOL §1.2 step 5), so a 400 never touches the database.
 */
export function registerRoute<S extends RouteSpec>(
  app: FastifyInstance,
  spec: S,
  handler: (input: Input<Out<S['params']>, Out<S['query']>, Out<S['body']>>) => Promise<unknown>,
): void {
  app.route({
    method: spec.method,
    url: spec.url,
    config: { level: spec.level },
    handler: async (request, reply) => {
      const details: FieldIssue[] = [];
      const parse = (schema: z.ZodType | undefined, value: unknown, prefix: string) => {
        if (!schema) return undefined;
        const result = schema.safeParse(value ?? {});
        if (!result.success) {
          details.push(...issuesToDetails(prefix, result.error));
          return undefined;
        }
        return result.data;
      };
      const params = parse(spec.params, request.params, 'params');
      const query = parse(spec.query, request.query, 'query');
      const body = parse(spec.body, request.body === undefined ? {} : request.body, 'body');
      if (details.length) throw new QueenError('VALIDATION_FAILED', `Invalid request: ${details.map((d) => `${d.field} ${d.message}`).join('; ')}`, { details });
      const out = await handler({ params, query, body, request, reply } as Input<any, any, any>);
      if (!reply.sent && spec.successStatus) reply.code(spec.successStatus);
      return out;
    },
  });
}
