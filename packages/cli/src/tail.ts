import { randomBytes } from 'node:crypto';
import { Queen, QueenError } from '@queen-mq/client';
import type { CliIO } from './io.js';
import { printMessages, wantsJson } from './output.js';
import { UsageError } from './usage.js';

interface TailArgs {
  url: string;
  token?: string;
  json?: boolean;
  queue: string;
  partition?: string;
  /** A named group; absent → a throw-away group of this tail, deleted when it stops. */
  group?: string;
  from?: 'all' | 'new';
  batch?: number;
  /** Required to tail in queue mode (`--group __QUEUE_MODE__`): it consumes the workers' messages. */
  ack?: boolean;
}

const QUEUE_MODE = '__QUEUE_MODE__';

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => (clearTimeout(t), resolve()), { once: true });
  });

/**
 * `queen tail <queue>`: long-polls until stopped (Ctrl-C) and prints each
 * message. By default it reads with a consumer group of its own
 * (`queen-tail-<random>`, starting at messages pushed from now on unless
 * `--from all`): running workers lose nothing, and the group is deleted when
 * the tail stops. `--group g` reads (and acks) as that group; queue mode
 * (`--group __QUEUE_MODE__`) takes the messages away from the workers and is
 * refused unless `--ack` says so.
 */
export async function tailCommand(io: CliIO, args: TailArgs): Promise<number> {
  if (args.group === QUEUE_MODE && !args.ack) {
    throw new UsageError('tailing in queue mode acks the messages your workers would get: add --ack if that is what you want');
  }
  const throwAway = args.group === undefined;
  const group = args.group ?? `queen-tail-${randomBytes(4).toString('hex')}`;
  const from = args.from ?? (throwAway ? 'new' : undefined);
  const queen = new Queen({ url: args.url, bearerToken: args.token ?? io.env.QUEEN_TOKEN });
  const json = wantsJson(io, args.json);
  const queue = args.partition === undefined ? queen.queue(args.queue) : queen.queue(args.queue).partition(args.partition);
  if (throwAway && !json) io.stderr.write(`tailing ${args.queue} as consumer group ${group} (from ${from})\n`);
  let header = true;
  let popped = false;
  try {
    while (!io.signal?.aborted) {
      let res;
      try {
        res = await queue.pop({ batch: args.batch ?? 100, wait: true, timeout: 30000, consumerGroup: group, subscriptionMode: from, signal: io.signal });
        popped = true;
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
    if (throwAway && popped) {
      // Best effort: the route needs the admin level; a leftover group holds only cursors.
      await queen.api.groupQueueDelete({ params: { group, queue: args.queue }, query: { deleteMetadata: true } }).catch((err: Error) =>
        io.stderr.write(`could not delete consumer group ${group}: ${err.message}\n`),
      );
    }
    await queen.close();
  }
}
