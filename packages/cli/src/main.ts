#!/usr/bin/env node
// The `queen` command. `main(argv, io)` is the whole CLI; the lines at the
// bottom run it when this file is the process entry point.
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { QueenError } from '@queen-mq/client';
import { devCommand } from './dev.js';
import { processIO, type CliIO } from './io.js';
import { migrateCommand } from './migrate.js';
import { popCommand } from './pop.js';
import { pushCommand } from './push.js';
import { tailCommand } from './tail.js';
import { USAGE, UsageError } from './usage.js';

type Options = NonNullable<ParseArgsConfig['options']>;

const globalOptions: Options = {
  url: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
};

const commandOptions: Record<string, { options: Options; positionals: [min: number, max: number] }> = {
  dev: { options: { port: { type: 'string' }, 'data-dir': { type: 'string' } }, positionals: [0, 0] },
  migrate: { options: { 'data-dir': { type: 'string' } }, positionals: [0, 0] },
  push: { options: { partition: { type: 'string' }, tx: { type: 'string' } }, positionals: [1, 2] },
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
  },
  tail: {
    options: { group: { type: 'string' }, from: { type: 'string' }, partition: { type: 'string' }, batch: { type: 'string' } },
    positionals: [1, 1],
  },
};

function int(value: unknown, name: string): number | undefined {
  if (value === undefined) return undefined;
  const s = String(value);
  if (!/^\d+$/.test(s)) throw new UsageError(`--${name} must be a non-negative integer, got "${s}"`);
  return Number(s);
}

function str(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

/**
 * Runs one `queen` command and answers its exit code: 0 done, 1 the broker
 * refused or failed (the error code is printed), 2 a usage mistake.
 */
export async function main(argv: string[], io: CliIO): Promise<number> {
  const command = argv[0];
  if (!command || command === '-h' || command === '--help' || command === 'help') {
    io.stdout.write(USAGE);
    return command ? 0 : 2;
  }
  const spec = commandOptions[command];
  if (!spec) {
    io.stderr.write(`queen: unknown command "${command}"\n\n${USAGE}`);
    return 2;
  }
  try {
    let parsed;
    try {
      parsed = parseArgs({ args: argv.slice(1), options: { ...globalOptions, ...spec.options }, allowPositionals: true, strict: true });
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
    const { values: v, positionals } = parsed;
    if (v.help) {
      io.stdout.write(USAGE);
      return 0;
    }
    const [min, max] = spec.positionals;
    if (positionals.length < min || positionals.length > max) {
      throw new UsageError(`${command} takes ${min === max ? min : `${min} to ${max}`} argument(s), got ${positionals.length}`);
    }
    const url = str(v.url) ?? io.env.QUEEN_URL ?? 'http://localhost:6632';
    const json = v.json === true;
    switch (command) {
      case 'dev':
        return await devCommand(io, { port: int(v.port, 'port'), dataDir: str(v['data-dir']) });
      case 'migrate':
        return await migrateCommand(io, { dataDir: str(v['data-dir']) });
      case 'push':
        return await pushCommand(io, { url, json, queue: positionals[0]!, payload: positionals[1], partition: str(v.partition), tx: str(v.tx) });
      case 'pop':
        return await popCommand(io, {
          url,
          json,
          queue: positionals[0]!,
          partition: str(v.partition),
          batch: int(v.batch, 'batch'),
          group: str(v.group),
          wait: v.wait === true,
          timeout: int(v.timeout, 'timeout'),
          ack: v.ack === true,
        });
      case 'tail': {
        const from = str(v.from);
        if (from !== undefined && from !== 'all' && from !== 'new') throw new UsageError(`--from must be "all" or "new", got "${from}"`);
        return await tailCommand(io, { url, json, queue: positionals[0]!, partition: str(v.partition), group: str(v.group), from, batch: int(v.batch, 'batch') });
      }
    }
    return 2;
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr.write(`queen ${command}: ${err.message}\nRun "queen --help" for usage.\n`);
      return 2;
    }
    if (err instanceof QueenError) {
      io.stderr.write(`queen ${command}: ${err.code} (HTTP ${err.status}): ${err.message}\n`);
      for (const d of err.details ?? []) io.stderr.write(`  ${d.field}: ${d.message}\n`);
      return 1;
    }
    const e = err as Error & { code?: string };
    io.stderr.write(`queen ${command}: ${e.code ? `${e.code}: ` : ''}${e.message}\n`);
    return 1;
  }
}

function isEntryPoint(): boolean {
  const script = process.argv[1];
  if (!script) return false;
  try {
    return realpathSync(script) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isEntryPoint()) {
  const code = await main(process.argv.slice(2), processIO());
  process.exit(code);
}
