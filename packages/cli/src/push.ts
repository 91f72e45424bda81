import { Queen, type PushResult } from '@queen-mq/client';
import { lines, type CliIO } from './io.js';
import { printPushResults, progress, wantsJson } from './output.js';
import { UsageError } from './usage.js';

interface PushArgs {
  url: string;
  json?: boolean;
  queue: string;
  /** The payload as JSON; absent → one payload per stdin line. */
  payload?: string;
  partition?: string;
  tx?: string;
  /** Bearer token (default $QUEEN_TOKEN). */
  token?: string;
}

/** Lines sent per request when reading stdin: one transaction each. */
const STDIN_BATCH = 500;

function parseJson(text: string, where: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new UsageError(`${where} is not valid JSON: ${text.length > 80 ? `${text.slice(0, 80)}…` : text}`);
  }
}

/**
 * `queen push <queue> [json] [--partition p] [--tx id]`. With no JSON argument
 * every non-empty stdin line is one message (a line shaped like
 * `{"payload":…, "transactionId":…}` is taken as an item, as in the client).
 */
export async function pushCommand(io: CliIO, args: PushArgs): Promise<number> {
  const queen = new Queen({ url: args.url, bearerToken: args.token ?? io.env.QUEEN_TOKEN });
  const json = wantsJson(io, args.json);
  const queue = args.partition === undefined ? queen.queue(args.queue) : queen.queue(args.queue).partition(args.partition);
  try {
    if (args.payload !== undefined) {
      const payload = parseJson(args.payload, 'the message');
      const item = args.tx === undefined ? payload : { payload, transactionId: args.tx };
      printPushResults(io, json, await queue.push([item]));
      return 0;
    }
    if (args.tx !== undefined) throw new UsageError('--tx needs a JSON argument (one message); stdin lines are pushed without one');
    if (!io.stdin || io.stdin.isTTY) throw new UsageError('give the message as an argument, or pipe JSON lines on stdin');
    let pending: unknown[] = [];
    let total = 0;
    const line = progress(io);
    let lineNo = 0;
    const flush = async () => {
      if (!pending.length) return;
      const results: PushResult[] = await queue.push(pending);
      // Indexes count lines of the whole input, not of one request.
      printPushResults(io, json, results.map((r) => ({ ...r, index: r.index + total })));
      total += pending.length;
      pending = [];
      line.update(`pushed ${total} message(s)…`);
    };
    for await (const line of lines(io.stdin)) {
      lineNo++;
      if (!line.trim()) continue;
      pending.push(parseJson(line, `stdin line ${lineNo}`));
      if (pending.length >= STDIN_BATCH) await flush();
    }
    await flush();
    line.done(`pushed ${total} message(s) to ${args.queue}`);
    return 0;
  } finally {
    await queen.close();
  }
}
