import type { QueueDetail } from '@queen-mq/protocol';
import { allPages } from './api.js';
import { parseJsonArg, requireYes, type CommandSpec } from './command.js';
import { EXIT } from './exit.js';
import { printObject, printRows, printTable } from './output.js';
import { UsageError } from './usage.js';

/** `queen queues list|show|configure|delete`. */
export const queuesCommands: Record<string, CommandSpec> = {
  list: {
    options: {},
    positionals: [0, 0],
    async run({ io, queen, json }) {
      const queues = await allPages(async (query) => (await queen.api.queueList({ query })).queues);
      printRows(io, json, ['name', 'partitions', 'namespace', 'task', 'createdAt'], queues);
      return EXIT.OK;
    },
  },
  show: {
    options: {},
    positionals: [1, 1],
    async run({ io, queen, json, args }) {
      let q: QueueDetail | undefined;
      const partitions = await allPages(async (query) => {
        const page = await queen.api.queueGet({ params: { queue: args[0]! }, query });
        q ??= page;
        return page.partitions;
      });
      q = { ...q!, partitions };
      if (json) {
        printRows(io, true, [], [q]);
        return EXIT.OK;
      }
      io.stdout.write(`queue ${q.queue}\n\n`);
      printTable(io, ['option', 'value'], Object.entries(q.options).map(([option, value]) => ({ option, value })));
      io.stdout.write('\n');
      const rows = partitions.map((p) => ({ ...p, retained: String(BigInt(p.headOffset) - BigInt(p.firstOffset) + 1n) }));
      printTable(io, ['name', 'firstOffset', 'headOffset', 'retained', 'segments', 'lastActivity', 'id'], rows);
      return EXIT.OK;
    },
  },
  configure: {
    options: {},
    positionals: [1, 100],
    async run({ io, queen, json, args }) {
      const [queue, ...pairs] = args;
      if (pairs.length === 0) throw new UsageError('configure takes option=value pairs, e.g. leaseTime=60 retryLimit=5 (value JSON; null resets)');
      const options: Record<string, unknown> = {};
      for (const pair of pairs) {
        const eq = pair.indexOf('=');
        if (eq <= 0) throw new UsageError(`"${pair}" is not option=value`);
        options[pair.slice(0, eq)] = parseJsonArg(pair.slice(eq + 1), `the value of ${pair.slice(0, eq)}`);
      }
      const res = await queen.api.configure({ body: { queue: queue!, options } });
      if (json) printRows(io, true, [], [res]);
      else printTable(io, ['option', 'value'], Object.entries(res.options).map(([option, value]) => ({ option, value })));
      return EXIT.OK;
    },
  },
  delete: {
    options: { yes: { type: 'boolean' } },
    positionals: [1, 1],
    async run({ io, queen, json, args, values }) {
      requireYes(values, `deleting queue ${args[0]} (its messages, cursors and DLQ entries)`);
      const res = await queen.api.queueDelete({ params: { queue: args[0]! } });
      printObject(io, json, res);
      return res.existed ? EXIT.OK : EXIT.NOT_FOUND;
    },
  },
};

