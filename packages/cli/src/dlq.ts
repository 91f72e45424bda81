import { int, str, type CommandSpec, type Ctx } from './command.js';
import { EXIT } from './exit.js';
import { printRows, progress } from './output.js';
import { UsageError } from './usage.js';

const REQUEUE_COLUMNS = ['id', 'success', 'status', 'queue', 'partition', 'entriesDeleted', 'offset', 'messageId', 'code'];

/** The bulk filters of `dlq requeue`, by their body field. */
const FILTERS = { queue: 'queue', partition: 'partition', error: 'errorContains', after: 'failedAfter', before: 'failedBefore' } as const;

/**
 * `dlq requeue` without ids: pages through the matching entries (oldest
 * failure first) until none is left, with a progress line. `failedBefore`
 * is pinned to the start, so a message that fails again during the replay
 * is not replayed again by it; a page that moves nothing ends it too.
 */
async function requeueInBulk(ctx: Ctx): Promise<number> {
  const { io, queen, json, values } = ctx;
  const filters: Record<string, string> = {};
  for (const [flag, field] of Object.entries(FILTERS)) if (typeof values[flag] === 'string') filters[field] = values[flag];
  const group = str(values.group);
  if (Object.keys(filters).length === 0 && group === undefined) {
    throw new UsageError('dlq requeue: name message ids, or filters: --queue, --group, --partition, --error, --after, --before');
  }
  const body = {
    ...filters,
    failedBefore: filters.failedBefore ?? new Date().toISOString(),
    ...(group !== undefined ? { consumerGroup: group } : {}),
    ...(typeof values['to-queue'] === 'string' ? { targetQueue: values['to-queue'] } : {}),
    ...(typeof values['to-partition'] === 'string' ? { targetPartition: values['to-partition'] } : {}),
    limit: int(values.page, 'page') ?? 100,
  };
  const line = progress(io);
  let queued = 0;
  let duplicate = 0;
  let refused = 0;
  for (;;) {
    const res = await queen.api.dlqRequeue({ body });
    printRows(io, json, REQUEUE_COLUMNS, res.results);
    for (const r of res.results) {
      if (r.status === 'queued') queued++;
      else if (r.status === 'duplicate') duplicate++;
    }
    refused += res.refused ?? 0;
    const remaining = res.remaining ?? 0;
    const full = refused ? `, ${refused} kept in the DLQ (queue full)` : '';
    const text = `requeued ${queued + duplicate} (${queued} queued, ${duplicate} duplicate)${full}, ${remaining} entries left`;
    if (remaining === 0 || res.requeued === 0) {
      line.done(text);
      break;
    }
    line.update(text);
  }
  return EXIT.OK;
}

async function actOnIds(ctx: Ctx, route: 'dlqRequeue' | 'dlqDelete', columns: string[]): Promise<number> {
  const target = route === 'dlqRequeue' ? { targetQueue: str(ctx.values['to-queue']), targetPartition: str(ctx.values['to-partition']) } : {};
  const res = await ctx.queen.api[route]({ body: { ids: ctx.args, consumerGroup: str(ctx.values.group), ...target } });
  printRows(ctx.io, ctx.json, columns, res.results);
  const missing = res.results.filter((r) => !r.success && r.code !== 'QUEUE_FULL').length;
  const full = res.results.filter((r) => r.code === 'QUEUE_FULL').length;
  if (missing) ctx.io.stderr.write(`${missing} of ${res.results.length} id(s) had no DLQ entry\n`);
  if (full) ctx.io.stderr.write(`${full} of ${res.results.length} id(s) stay in the DLQ: their queue is at its maxSize (QUEUE_FULL)\n`);
  return missing ? EXIT.NOT_FOUND : full ? EXIT.ERROR : EXIT.OK;
}

/** `queen dlq list|requeue|delete`. */
export const dlqCommands: Record<string, CommandSpec> = {
  list: {
    options: { queue: { type: 'string' }, group: { type: 'string' }, partition: { type: 'string' }, limit: { type: 'string' }, offset: { type: 'string' } },
    positionals: [0, 0],
    async run({ io, queen, json, values }) {
      const res = await queen.api.dlq({
        query: {
          queue: str(values.queue),
          consumerGroup: str(values.group),
          partition: str(values.partition),
          limit: int(values.limit, 'limit'),
          offset: int(values.offset, 'offset'),
        },
      });
      printRows(io, json, ['id', 'queue', 'partition', 'consumerGroup', 'offset', 'retryCount', 'failedAt', 'errorMessage', 'data'], res.messages);
      if (!json) io.stderr.write(`${res.messages.length} of ${res.total} entr${res.total === 1 ? 'y' : 'ies'}\n`);
      return EXIT.OK;
    },
  },
  requeue: {
    options: {
      group: { type: 'string' },
      queue: { type: 'string' },
      partition: { type: 'string' },
      error: { type: 'string' },
      after: { type: 'string' },
      before: { type: 'string' },
      page: { type: 'string' },
      'to-queue': { type: 'string' },
      'to-partition': { type: 'string' },
    },
    positionals: [0, 1000],
    run: (ctx) => (ctx.args.length ? actOnIds(ctx, 'dlqRequeue', REQUEUE_COLUMNS) : requeueInBulk(ctx)),
  },
  delete: {
    options: { group: { type: 'string' } },
    positionals: [1, 1000],
    run: (ctx) => actOnIds(ctx, 'dlqDelete', ['id', 'success', 'entriesDeleted', 'code']),
  },
};
