import { int, parseJsonArg, str, type CommandSpec } from './command.js';
import { EXIT } from './exit.js';
import { printObject, printRows } from './output.js';

/** `queen kv get|set|list|delete` over the KV routes (a broker that composes the KV). */
export const kvCommands: Record<string, CommandSpec> = {
  get: {
    options: {},
    positionals: [2, 2],
    async run({ io, queen, json, args }) {
      printObject(io, json, await queen.api.kvGet({ params: { namespace: args[0]!, key: args[1]! } }));
      return EXIT.OK;
    },
  },
  set: {
    options: { ttl: { type: 'string' }, 'expected-version': { type: 'string' } },
    positionals: [3, 3],
    async run({ io, queen, json, args, values }) {
      const value = parseJsonArg(args[2]!, 'the value');
      const body = { value, ttlSeconds: int(values.ttl, 'ttl'), expectedVersion: int(values['expected-version'], 'expected-version') };
      printObject(io, json, await queen.api.kvPut({ params: { namespace: args[0]!, key: args[1]! }, body }));
      return EXIT.OK;
    },
  },
  list: {
    options: { prefix: { type: 'string' }, after: { type: 'string' }, limit: { type: 'string' } },
    positionals: [1, 1],
    async run({ io, queen, json, args, values }) {
      // Pages of up to 1000 until --limit keys (default 100) or the end.
      const limit = int(values.limit, 'limit') ?? 100;
      const items: Record<string, unknown>[] = [];
      let after = str(values.after);
      let more = false;
      while (items.length < limit) {
        const page = await queen.api.kvList({
          params: { namespace: args[0]! },
          query: { prefix: str(values.prefix), after, limit: Math.min(1000, limit - items.length) },
        });
        items.push(...page.items);
        more = page.nextAfter !== null;
        if (!more) break;
        after = page.nextAfter!;
      }
      printRows(io, json, ['key', 'version', 'expiresAt', 'updatedAt', 'value'], items);
      if (more) io.stderr.write(`more keys follow: --after ${JSON.stringify(String(items[items.length - 1]?.key))}\n`);
      return EXIT.OK;
    },
  },
  delete: {
    options: { 'expected-version': { type: 'string' } },
    positionals: [2, 2],
    async run({ io, queen, json, args, values }) {
      const res = await queen.api.kvDelete({
        params: { namespace: args[0]!, key: args[1]! },
        query: { expectedVersion: int(values['expected-version'], 'expected-version') },
      });
      printObject(io, json, res);
      return res.deleted ? EXIT.OK : EXIT.NOT_FOUND;
    },
  },
};
