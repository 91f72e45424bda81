import type { Queen } from '@queen-mq/client';
import { isBookkeepingStateKey, QueenError } from '@queen-mq/protocol';
import { allPages } from './api.js';
import { int, requireYes, str, type CommandSpec } from './command.js';
import { EXIT } from './exit.js';
import { printObject, printRows } from './output.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const allQueries = (queen: Queen) =>
  allPages(async (query) => (await queen.api.streamsList({ query })).queries);

/** What each verdict of a plan asks of the deploy. */
const VERDICT = {
  same: 'nothing changed',
  safe: 'run() resumes as is',
  'keep-state': "run({ upgrade: 'keep-state' }) resumes with the state rows as they are",
  blocked: 'needs run({ reset: true }), or a migrateState on every blocking stage',
} as const;

/** A query by name or query_id; QUERY_NOT_FOUND (exit 3) when neither matches. */
async function findQuery(queen: Queen, ref: string) {
  const q = (await allQueries(queen)).find((x) => x.name === ref || x.query_id === ref.toLowerCase());
  if (!q) throw new QueenError('QUERY_NOT_FOUND', `No stream query named "${ref}"`);
  return q;
}

/** `queen streams list|state|plan|drop`. */
export const streamsCommands: Record<string, CommandSpec> = {
  list: {
    options: {},
    positionals: [0, 0],
    async run({ io, queen, json }) {
      printRows(io, json, ['name', 'source_queue', 'sink_queue', 'state_rows', 'updated_at', 'query_id'], await allQueries(queen));
      return EXIT.OK;
    },
  },
  state: {
    options: { prefix: { type: 'string' }, key: { type: 'string', multiple: true }, limit: { type: 'string' }, bookkeeping: { type: 'boolean' } },
    positionals: [1, 2],
    async run({ io, queen, json, args, values }) {
      const query = await findQuery(queen, args[0]!);
      // The state of one partition (its id, or its name in the source queue), else of every source partition.
      let partitions = await allPages(
        async (page) => (await queen.api.queueGet({ params: { queue: query.source_queue }, query: page })).partitions as { id: string; name: string }[],
      ).catch((err) => {
        if (err instanceof QueenError && err.code === 'QUEUE_NOT_FOUND') return [] as { id: string; name: string }[];
        throw err;
      });
      // A join's state lives on a shard per partition name, none of them a source partition.
      const joins = await queen.api.streamsJoins({ params: { name: query.name }, query: { limit: 1000 } });
      partitions = [...partitions, ...joins.shards.map((s) => ({ id: s.shard_id, name: s.partition ?? '' }))];
      const wanted = args[1];
      if (wanted !== undefined) {
        partitions = partitions.filter((p) => p.name === wanted || p.id === wanted.toLowerCase());
        if (!partitions.length) {
          if (!UUID.test(wanted)) throw new QueenError('PARTITION_NOT_FOUND', `No partition "${wanted}" in source queue ${query.source_queue}`);
          partitions = [{ id: wanted.toLowerCase(), name: '' }];
        }
      }
      const limit = int(values.limit, 'limit') ?? 1000;
      const keys = Array.isArray(values.key) ? (values.key as string[]) : undefined;
      const rows: Record<string, unknown>[] = [];
      let truncated = false;
      for (const p of partitions) {
        let after: string | undefined;
        do {
          const page = await queen.api.streamsStateGet({
            body: { query_id: query.query_id, partition_id: p.id, key_prefix: str(values.prefix), keys, after, limit: Math.min(1000, limit - rows.length) },
          });
          // The runner's bookkeeping rows (watermark, close horizon, a join's clock) only with --bookkeeping.
          for (const r of page.rows) if (rows.length < limit && (values.bookkeeping || !isBookkeepingStateKey(r.key))) rows.push({ partition: p.name, partitionId: p.id, ...r });
          after = page.next_after ?? undefined;
          if (rows.length >= limit && after) truncated = true;
        } while (after && rows.length < limit);
        if (rows.length >= limit) break;
      }
      printRows(io, json, ['partition', 'key', 'version', 'updated_at', 'value'], rows);
      if (truncated) io.stderr.write(`showing the first ${limit} rows (--limit to see more)\n`);
      return EXIT.OK;
    },
  },
  plan: {
    options: {},
    positionals: [1, 1],
    async run({ io, queen, json, args }) {
      // The last version proposed for the query (by stream.plan(), or a run() that was refused) against the registered one.
      const query = await findQuery(queen, args[0]!);
      const answer = await queen.api.streamsPlanShow({ params: { name: query.name } });
      if (json) {
        printObject(io, true, answer);
        return EXIT.OK;
      }
      printRows(io, false, ['stage', 'kind', 'change', 'state_rows', 'state'], answer.plan.stages.map((s) => ({
        stage: s.name,
        kind: s.kind,
        change: s.change,
        state_rows: s.stateful ? s.state_rows : '',
        state: s.state_action === 'none' ? '' : s.state_action,
      })));
      io.stdout.write(`\nverdict: ${answer.plan.verdict} (${VERDICT[answer.plan.verdict]})\n`);
      if (answer.plan.blocking.length > 0) io.stdout.write(`blocking: ${answer.plan.blocking.join(', ')}\n`);
      return EXIT.OK;
    },
  },
  lag: {
    options: {},
    positionals: [1, 1],
    async run({ io, queen, json, args }) {
      // Catch-up progress (a backfill started with run({ from, maxMessagesPerSecond })): per source partition, the messages
      // behind the query's cursor and how old the oldest of them is.
      const query = await findQuery(queen, args[0]!);
      const rows = await allPages(async (page) => (await queen.api.streamsPartitions({ params: { name: query.name }, query: page })).partitions);
      const shown = json
        ? rows
        : rows.map((p) => ({ ...p, time_lag: p.lag > 0 ? `${Math.round(p.time_lag)}s` : '', watermark: p.watermark === null ? '' : new Date(p.watermark).toISOString() }));
      printRows(io, json, ['partition', 'cursor', 'head_offset', 'lag', 'time_lag', 'leased', 'state_rows', 'watermark'], shown);
      return EXIT.OK;
    },
  },
  drop: {
    options: { yes: { type: 'boolean' } },
    positionals: [1, 1],
    async run({ io, queen, json, args, values }) {
      requireYes(values, `dropping stream query ${args[0]} and its state`);
      printObject(io, json, await queen.api.streamsDrop({ body: { name: args[0]! } }));
      return EXIT.OK;
    },
  },
};
