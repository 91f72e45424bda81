import type { FastifyInstance } from 'fastify';
import { adminRoutes, optionsStoredWhenSet, QueenError, queueOptionDefaults, type ConfigureBody } from '@queen-mq/protocol';
import type { BrokerContext } from '../context/context.js';
import { encryptionAvailable, forgetEncryptionFlags } from '../log/encryption.js';
import { registerRoute } from '../http/http.js';

const storedWhenSet = new Set<string>(optionsStoredWhenSet);

/** The defaults filled into stored options: all but those stored only when set. */
const filledDefaults = Object.fromEntries(Object.entries(queueOptionDefaults).filter(([name]) => !storedWhenSet.has(name)));

/**
 * The option patch to merge (PROTOCOL §5.1, fix): omitted options keep their
 * value, `null` puts one option back to its default, which for an option
 * stored only when set (retryDelay) means removing it (`unset`).
 */
function optionPatch(options: ConfigureBody['options']): { patch: Record<string, unknown>; unset: string[] } {
  const patch: Record<string, unknown> = {};
  const unset: string[] = [];
  for (const [name, value] of Object.entries(options ?? {})) {
    if (value === undefined) continue;
    if (value === null && storedWhenSet.has(name)) unset.push(name);
    else patch[name] = value === null ? queueOptionDefaults[name as keyof typeof queueOptionDefaults] : value;
  }
  return { patch, unset };
}

/**
 * Creates the queue and its Default partition if absent, then merges the
 * options in one UPDATE, so two concurrent configures of different options
 * both land. Stored options hold every option (defaults filled in) but
 * retryDelay, which is stored only when set: the echo shows its default.
 */
async function configureQueue(ctx: BrokerContext, body: ConfigureBody) {
  if (body.options?.encryptionEnabled === true && !encryptionAvailable(ctx)) {
    // Checked before anything is written: the queue is neither created nor changed.
    const message = 'requires QUEEN_ENCRYPTION_KEY (64 hex characters) on the broker';
    throw new QueenError('VALIDATION_FAILED', `encryptionEnabled ${message}`, {
      details: [{ field: 'body.options.encryptionEnabled', message }],
    });
  }
  const { patch, unset } = optionPatch(body.options);
  for (let attempt = 0; ; attempt++) {
    await ctx.partitions.ensure([{ queue: body.queue, partition: 'Default' }]);
    const { rows } = await ctx.db.query<{ id: string; namespace: string | null; task: string | null; options: Record<string, unknown>; partition_id: string | null }>(
      `update queen.queues q
          set options = ($2::jsonb || q.options || $3::jsonb) - $6::text[],
              namespace = coalesce($4, q.namespace),
              task = coalesce($5, q.task),
              updated_at = now()
        where q.name = $1
       returning q.id, q.namespace, q.task, q.options,
                 (select p.id from queen.partitions p where p.queue_id = q.id and p.name = 'Default') as partition_id`,
      [body.queue, JSON.stringify(filledDefaults), JSON.stringify(patch), body.namespace ?? null, body.task ?? null, unset],
    );
    const row = rows[0];
    if (!row || !row.partition_id) {
      // Deleted (queue, or its Default partition by cleanup) since our cached lookup: create it again.
      ctx.partitions.forget(body.queue);
      if (attempt < 2) continue;
      throw new QueenError('INTERNAL_ERROR', 'queue vanished while being configured');
    }
    // This broker pushes by the new flag at once; others within the flag cache's TTL.
    forgetEncryptionFlags(ctx, body.queue);
    const options: Record<string, unknown> = {};
    for (const [name, fallback] of Object.entries(queueOptionDefaults)) options[name] = row.options[name] ?? fallback;
    return { configured: true as const, queueId: row.id, partitionId: row.partition_id, queue: body.queue, namespace: row.namespace, task: row.task, options };
  }
}

export function configureRoutes(app: FastifyInstance, ctx: BrokerContext): void {
  registerRoute(app, adminRoutes.configure, async ({ body }) => configureQueue(ctx, body));
}
