import { Queen, QueenError } from '@queen-mq/client';
import type { CliIO } from './io.js';
import { printMessages, wantsJson } from './output.js';

export interface TailArgs {
  url: string;
  json?: boolean;
  queue: string;
  partition?: string;
  group?: string;
  from?: 'all' | 'new';
  batch?: number;
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => (clearTimeout(t), resolve()), { once: true });
  });

/**
 * `queen tail <queue>`: long-polls until stopped (Ctrl-C), prints each message
 * and acks it. `--from new` makes a new consumer group start at messages pushed
 * from now on; an existing group resumes at its cursor either way.
 */
export async function tailCommand(io: CliIO, args: TailArgs): Promise<number> {
  const queen = new Queen({ url: args.url, bearerToken: io.env.QUEEN_TOKEN });
  const json = wantsJson(io, args.json);
  const queue = args.partition === undefined ? queen.queue(args.queue) : queen.queue(args.queue).partition(args.partition);
  let header = true;
  try {
    while (!io.signal?.aborted) {
      let res;
      try {
        res = await queue.pop({ batch: args.batch ?? 100, wait: true, timeout: 30000, consumerGroup: args.group, subscriptionMode: args.from, signal: io.signal });
      } catch (err) {
        if (io.signal?.aborted) break;
        // A 4xx will not get better by asking again; a broker restart will.
        if (err instanceof QueenError && err.status < 500) throw err;
        io.stderr.write(`pop failed (${(err as Error).message}), retrying\n`);
        await sleep(1000, io.signal);
        continue;
      }
      if (!res) continue;
      printMessages(io, json, res.messages, header);
      header = false;
      const results = await queen.ack(res.messages, { consumerGroup: res.consumerGroup });
      for (const r of results) if (!r.success) io.stderr.write(`ack of ${r.transactionId} refused: ${r.code} ${r.error}\n`);
    }
    return 0;
  } finally {
    await queen.close();
  }
}
