import type { PoppedMessage, PushResult } from '@queen-mq/protocol';
import type { CliIO } from './io.js';

/**
 * JSON lines when asked (`--json`) or when stdout is not a terminal (piped
 * into jq or a file); an aligned table for a person at a TTY.
 */
export function wantsJson(io: CliIO, json: boolean | undefined): boolean {
  return json === true || !io.stdout.isTTY;
}

function printJsonLines(io: CliIO, rows: unknown[]): void {
  for (const row of rows) io.stdout.write(`${JSON.stringify(row)}\n`);
}

function cell(value: unknown, width = 60): string {
  const s = typeof value === 'string' ? value : value === undefined ? '' : JSON.stringify(value);
  const flat = s.replace(/\s+/g, ' ');
  return flat.length > width ? `${flat.slice(0, width - 1)}…` : flat;
}

export function printTable(io: CliIO, columns: string[], rows: Record<string, unknown>[]): void {
  const cells = rows.map((r) => columns.map((c) => cell(r[c])));
  const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((row) => row[i]!.length)));
  const line = (values: string[]) => values.map((v, i) => v.padEnd(widths[i]!)).join('  ').trimEnd();
  io.stdout.write(`${line(columns)}\n`);
  for (const row of cells) io.stdout.write(`${line(row)}\n`);
}

export function printPushResults(io: CliIO, json: boolean, results: PushResult[]): void {
  if (json) return printJsonLines(io, results);
  printTable(io, ['index', 'status', 'offset', 'transaction_id', 'message_id'], results);
}

export function printMessages(io: CliIO, json: boolean, messages: PoppedMessage[], header = true): void {
  if (json) return printJsonLines(io, messages);
  const columns = ['offset', 'partition', 'transactionId', 'retryCount', 'createdAt', 'data'];
  if (header) return printTable(io, columns, messages);
  for (const m of messages) io.stdout.write(`${columns.map((c) => cell((m as Record<string, unknown>)[c])).join('  ')}\n`);
}

/** Rows as JSON lines, or a table of `columns` on a terminal. */
export function printRows(io: CliIO, json: boolean, columns: string[], rows: Record<string, unknown>[]): void {
  if (json) return printJsonLines(io, rows);
  if (rows.length === 0) {
    io.stderr.write('(none)\n');
    return;
  }
  printTable(io, columns, rows);
}

/** One object: a JSON line, or `field  value` lines on a terminal. */
export function printObject(io: CliIO, json: boolean, object: Record<string, unknown>): void {
  if (json) return printJsonLines(io, [object]);
  printTable(
    io,
    ['field', 'value'],
    Object.entries(object).map(([field, value]) => ({ field, value })),
  );
}

/**
 * A progress line on stderr for long work: rewritten in place on a terminal,
 * otherwise at most one line a second (and the last one always).
 */
export function progress(io: CliIO): { update(text: string): void; done(text: string): void } {
  const tty = io.stderr.isTTY === true;
  let last = 0;
  return {
    update(text) {
      if (tty) io.stderr.write(`\r${text}`);
      else if (Date.now() - last >= 1000) {
        io.stderr.write(`${text}\n`);
        last = Date.now();
      }
    },
    done(text) {
      io.stderr.write(tty ? `\r${text}\n` : `${text}\n`);
    },
  };
}
