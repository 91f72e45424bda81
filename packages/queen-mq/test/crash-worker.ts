// A stream runner in its own process, for the exactly-once test: the test
// SIGKILLs it at random moments and starts it again. Env: QUEEN_URL, SRC,
// SINK, QUERY_ID.
import { Queen, Stream } from 'queen-mq';

const url = process.env.QUEEN_URL!;
const queen = new Queen({ url });

const handle = await Stream.from(queen.queue(process.env.SRC!))
  .keyBy((m) => m.data.k)
  .windowTumbling({ seconds: 10, idleFlushMs: 200, eventTime: (m) => m.data.ts })
  .aggregate({ count: () => 1, sum: (m) => m.n })
  .map((agg, ctx) => ({ ...agg, window: ctx.windowKey, key: ctx.key }))
  .to(queen.queue(process.env.SINK!))
  .run({ queryId: process.env.QUERY_ID!, url, batchSize: 100, maxPartitions: 2, maxWaitMillis: 300 });

handle.on('cycle:commit', (c) => process.stdout.write(`commit ${c.partition} ${c.messages}\n`));
process.stdout.write(`ready ${handle.queryUuid}\n`);
process.on('SIGTERM', () => void handle.stop().then(() => process.exit(0)));
