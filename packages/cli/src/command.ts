import type { ParseArgsConfig } from 'node:util';
import type { Queen } from '@queen-mq/client';
import type { CliIO } from './io.js';
import { UsageError } from './usage.js';

export type Options = NonNullable<ParseArgsConfig['options']>;
type Values = Record<string, string | boolean | (string | boolean)[] | undefined>;

/** What an operator command gets: a client on the broker, the parsed line, the output mode. */
export interface Ctx {
  io: CliIO;
  queen: Queen;
  /** JSON lines (asked, or stdout is not a terminal). */
  json: boolean;
  values: Values;
  args: string[];
}

/** One command (or `group sub` command): its options, how many arguments, and what it does. */
export interface CommandSpec {
  options: Options;
  positionals: [min: number, max: number];
  run(ctx: Ctx): Promise<number>;
}

export function int(value: unknown, name: string): number | undefined {
  if (value === undefined) return undefined;
  const s = String(value);
  if (!/^\d+$/.test(s) || !Number.isSafeInteger(Number(s))) throw new UsageError(`--${name} must be a non-negative integer, got "${s}"`);
  return Number(s);
}

export function str(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

export function parseJsonArg(text: string, where: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new UsageError(`${where} is not valid JSON: ${text.length > 80 ? `${text.slice(0, 80)}…` : text}`);
  }
}

/** Destructive commands ask for `--yes`, so a slip of the shell history deletes nothing. */
export function requireYes(values: Values, what: string): void {
  if (values.yes !== true) throw new UsageError(`${what} cannot be undone: add --yes`);
}
