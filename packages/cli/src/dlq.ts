import { int, str, type CommandSpec, type Ctx } from './command.js';
import { EXIT } from './exit.js';
import { printRows } from './output.js';

async function actOnIds(ctx: Ctx, route: 'dlqRequeue' | 'dlqDelete', columns: string[]): Promise<number> {
  const res = await ctx.queen.api[route]({ body: { ids: ctx.args, consumerGroup: str(ctx.values.group) } });
  printRows(ctx.io, ctx.json, columns, res.results);
  const missing = res.results.filter((r) => !r.success).length;
  if (missing) ctx.io.stderr.write(`${missing} of ${res.results.length} id(s) had no DLQ entry\n`);
  return missing ? EXIT.NOT_FOUND : EXIT.OK;
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
    options: { group: { type: 'string' } },
    positionals: [1, 1000],
    run: (ctx) => actOnIds(ctx, 'dlqRequeue', ['id', 'success', 'queue', 'partition', 'entriesDeleted', 'offset', 'messageId', 'code']),
  },
  delete: {
    options: { group: { type: 'string' } },
    positionals: [1, 1000],
    run: (ctx) => actOnIds(ctx, 'dlqDelete', ['id', 'success', 'entriesDeleted', 'code']),
  },
};
