import { Queen } from '@queen-mq/client';
import type { CliIO } from './io.js';
import { printMessages, wantsJson } from './output.js';

interface PopArgs {
  url: string;
  json?: boolean;
  queue: string;
  partition?: string;
  batch?: number;
  group?: string;
  wait?: boolean;
  timeout?: number;
  ack?: boolean;
  /** Bearer token (default $QUEEN_TOKEN). */
  token?: string;
}

/**
 * `queen pop <queue>`: one pop, the messages printed. Without `--ack` they stay
 * leased (each printed message carries its leaseId and partitionId for a later
 * ack) and come back when the lease expires; with `--ack` they are acked
 * `completed` after printing.
 */
export async function popCommand(io: CliIO, args: PopArgs): Promise<number> {
  const queen = new Queen({ url: args.url, bearerToken: args.token ?? io.env.QUEEN_TOKEN });
  const json = wantsJson(io, args.json);
  try {
    const queue = args.partition === undefined ? queen.queue(args.queue) : queen.queue(args.queue).partition(args.partition);
    const res = await queue.pop({ batch: args.batch, consumerGroup: args.group, wait: args.wait, timeout: args.timeout, signal: io.signal });
    if (!res) {
      if (!json) io.stderr.write('no messages\n');
      return 0;
    }
    printMessages(io, json, res.messages);
    if (args.ack) {
      const results = await queen.ack(res.messages, { consumerGroup: res.consumerGroup });
      const refused = results.filter((r) => !r.success);
      for (const r of refused) io.stderr.write(`ack of ${r.transactionId} refused: ${r.code} ${r.error}\n`);
      if (refused.length) return 1;
    } else if (!json && res.leaseId) {
      io.stderr.write(`leased until acked or expired (leaseId ${res.leaseId})\n`);
    }
    return 0;
  } finally {
    await queen.close();
  }
}
