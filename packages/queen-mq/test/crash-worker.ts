// A stream runner in its own process, for the exactly-once test: the test
// SIGKILLs it at random moments and starts it again. Env: QUEEN_URL, SRC,
// SINK, QUERY_ID, and MODE or LATE (below).
import { Queen, Stream } from 'queen-mq';

const url = process.env.QUEEN_URL!;
const queen = new Queen({ url });

// MODE=processing: 1-second windows on the broker's createdAt, closed by the idle flush.
// LATE=<queue>: event time, late values go to that queue as late records.
const window =
  process.env.MODE === 'processing'
    ? { seconds: 1, idleFlushMs: 200 }
    : { seconds: 10, idleFlushMs: 200, eventTime: (m: any) => m.data.ts, ...(process.env.LATE ? { onLate: queen.queue(process.env.LATE) } : {}) };

const handle = await Stream.from(queen.queue(process.env.SRC!))
  .keyBy((m) => m.data.k)
  .windowTumbling(window)
  .aggregate({ count: () => 1, sum: (m) => m.n })
  .map((agg, ctx) => ({ ...agg, window: ctx.windowKey, key: ctx.key }))
  .to(queen.queue(process.env.SINK!))
  .run({ queryId: process.env.QUERY_ID!, url, batchSize: 100, maxPartitions: 2, maxWaitMillis: 300, onError: (e, info) => process.stderr.write(`error ${info.phase}: ${e.message}\n`) });

handle.on('cycle:commit', (c) => process.stdout.write(`commit ${c.partition} ${c.messages}\n`));
handle.on('lease:lost', (l) => process.stderr.write(`lease lost ${l.partitionId} ${l.code}\n`));
process.stdout.write(`ready ${handle.queryUuid}\n`);
if (process.env.EO_DEBUG) setInterval(() => process.stderr.write(`metrics ${JSON.stringify(handle.metrics())}\n`), 1000).unref();
process.on('SIGTERM', () => void handle.stop().then(() => process.exit(0)));
