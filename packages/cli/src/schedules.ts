import { allPages } from './api.js';
import { parseJsonArg, str, type CommandSpec } from './command.js';
import { EXIT } from './exit.js';
import { printObject, printRows } from './output.js';
import { UsageError } from './usage.js';

const MISSED = ['skip', 'one', 'all'] as const;
type Missed = (typeof MISSED)[number];

function missedOf(value: unknown): Missed | undefined {
  const s = str(value);
  if (s !== undefined && !(MISSED as readonly string[]).includes(s)) throw new UsageError(`--missed must be skip, one or all, got "${s}"`);
  return s as Missed | undefined;
}

/** `queen schedules list|add|delete` over /api/v1/schedules. */
export const schedulesCommands: Record<string, CommandSpec> = {
  list: {
    options: {},
    positionals: [0, 0],
    async run({ io, queen, json }) {
      const schedules = await allPages(async (page) => (await queen.api.scheduleList({ query: page })).schedules);
      printRows(io, json, ['name', 'cron', 'timeZone', 'queue', 'partition', 'missed', 'nextFireAt', 'lastFireAt'], schedules);
      return EXIT.OK;
    },
  },
  add: {
    options: { tz: { type: 'string' }, partition: { type: 'string' }, missed: { type: 'string' } },
    positionals: [3, 4],
    async run({ io, queen, json, args, values }) {
      const [name, cron, queue, payload] = args as [string, string, string, string | undefined];
      const res = await queen.schedule(name, {
        cron,
        queue,
        timeZone: str(values.tz),
        partition: str(values.partition),
        missed: missedOf(values.missed),
        ...(payload !== undefined ? { payload: parseJsonArg(payload, 'the payload') } : {}),
      });
      printObject(io, json, res);
      return EXIT.OK;
    },
  },
  delete: {
    options: {},
    positionals: [1, 1],
    async run({ io, queen, json, args }) {
      const res = await queen.api.scheduleDelete({ params: { name: args[0]! } });
      printObject(io, json, res);
      return res.deleted ? EXIT.OK : EXIT.NOT_FOUND;
    },
  },
};
