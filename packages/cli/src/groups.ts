import { allPages } from './api.js';
import { str, type CommandSpec } from './command.js';
import { EXIT } from './exit.js';
import { printObject, printRows } from './output.js';
import { UsageError } from './usage.js';

/** `queen groups list|show|seek`. */
export const groupsCommands: Record<string, CommandSpec> = {
  list: {
    options: { queue: { type: 'string' } },
    positionals: [0, 0],
    async run({ io, queen, json, values }) {
      const queue = str(values.queue);
      const groups = await allPages((query) => queen.api.groupList({ query }));
      // One row per (group, queue), each that queue's own: lag in messages and in seconds (age of the
      // oldest pending message), live leases and state (never another queue's of the group).
      const rows = groups.flatMap((g) =>
        g.queues
          .filter((q) => queue === undefined || q.queue === queue)
          .map((q) => ({ group: g.name, queue: q.queue, lag: q.lag, lagSeconds: q.maxTimeLag, members: q.members, state: q.state })),
      );
      printRows(io, json, ['group', 'queue', 'lag', 'lagSeconds', 'members', 'state'], rows);
      return EXIT.OK;
    },
  },
  show: {
    options: { queue: { type: 'string' } },
    positionals: [1, 1],
    async run({ io, queen, json, args, values }) {
      const res = await queen.api.groupGet({ params: { group: args[0]! }, query: { queue: str(values.queue) } });
      printRows(io, json, ['queue', 'partition', 'cursor', 'headOffset', 'lag', 'leased', 'leaseExpiresAt', 'lastConsumedAt'], res.partitions);
      return EXIT.OK;
    },
  },
  seek: {
    options: { 'to-end': { type: 'boolean' }, timestamp: { type: 'string' }, partition: { type: 'string' }, offset: { type: 'string' } },
    positionals: [2, 2],
    async run({ io, queen, json, args, values }) {
      const [group, queue] = args as [string, string];
      const toEnd = values['to-end'] === true;
      const timestamp = str(values.timestamp);
      const offset = str(values.offset);
      const partition = str(values.partition);
      if ([toEnd, timestamp !== undefined, offset !== undefined].filter(Boolean).length !== 1) {
        throw new UsageError('seek takes exactly one of --to-end, --timestamp <ISO> or --offset <n> (with --partition)');
      }
      if (offset !== undefined && !/^\d+$/.test(offset)) throw new UsageError(`--offset must be a non-negative integer, got "${offset}"`);
      if (partition === undefined) {
        if (offset !== undefined) throw new UsageError('--offset needs --partition: offsets are per partition');
        const res = await queen.api.seekQueue({ params: { group, queue }, body: toEnd ? { toEnd: true } : { timestamp } });
        printObject(io, json, res);
      } else {
        const body = toEnd ? {} : offset !== undefined ? { offset } : { timestamp };
        const res = await queen.api.seekPartition({ params: { group, queue, partition }, body });
        printObject(io, json, res);
      }
      return EXIT.OK;
    },
  },
};
