import type { FastifyInstance } from 'fastify';
import { registerRoute, type BrokerContext } from '@queen-mq/broker';
import { kvRoutes, QueenError, type KvIncrResult, type KvPutResult } from '@queen-mq/protocol';
import { applyKvOps, getEntry, listNamespaces, listEntries, type KvWireOp } from './store.js';
import type { AppliedOp } from './sql/queen.kv_apply_v1.js';
import type { KvMetrics } from './metrics.js';

/** One op in a transaction of its own; a failing op answers its catalogue error (409). */
async function applyOne(ctx: BrokerContext, op: KvWireOp): Promise<AppliedOp> {
  return (await ctx.db.transaction((client) => applyKvOps(client, [op])))[0]!;
}

/** The KV routes of PROTOCOL §6 (GET/PUT/DELETE a key, incr, list a namespace). */
export function kvHttpRoutes(app: FastifyInstance, ctx: BrokerContext, metrics: KvMetrics): void {
  registerRoute(app, kvRoutes.kvGet, async ({ params }) => {
    const entry = await getEntry(ctx.db, params.namespace, params.key);
    if (!entry) throw new QueenError('KV_NOT_FOUND', `Key ${params.namespace}/${params.key} not found`);
    return entry;
  });

  registerRoute(app, kvRoutes.kvPut, async ({ params, body }): Promise<KvPutResult> => {
    const r = await applyOne(ctx, {
      op: 'set',
      namespace: params.namespace,
      key: params.key,
      value: body.value,
      ...(body.ttlSeconds !== undefined ? { ttlSeconds: body.ttlSeconds } : {}),
      ...(body.expectedVersion !== undefined ? { expectedVersion: body.expectedVersion } : {}),
    });
    return {
      namespace: r.namespace,
      key: r.key,
      value: r.value,
      version: r.version!,
      expiresAt: r.expiresAt ?? null,
      updatedAt: r.updatedAt!,
      created: r.created!,
    };
  });

  registerRoute(app, kvRoutes.kvDelete, async ({ params, query }) => {
    const r = await applyOne(ctx, {
      op: 'delete',
      namespace: params.namespace,
      key: params.key,
      ...(query.expectedVersion !== undefined ? { expectedVersion: query.expectedVersion } : {}),
    });
    return { deleted: r.deleted };
  });

  registerRoute(app, kvRoutes.kvIncr, async ({ params, body }): Promise<KvIncrResult> => {
    const r = await applyOne(ctx, {
      op: 'incr',
      namespace: params.namespace,
      key: params.key,
      by: body.by,
      requireApplied: false,
      ...(body.max !== undefined ? { max: body.max } : {}),
      ...(body.ttlSeconds !== undefined ? { ttlSeconds: body.ttlSeconds } : {}),
    });
    if (!r.applied) metrics.incrDenied.inc();
    return { value: r.value as number, applied: r.applied, version: r.version, expiresAt: r.expiresAt ?? null };
  });

  registerRoute(app, kvRoutes.kvList, async ({ params, query }) => listEntries(ctx.db, params.namespace, query));
  registerRoute(app, kvRoutes.kvNamespaces, async ({ query }) => listNamespaces(ctx.db, query));
}
