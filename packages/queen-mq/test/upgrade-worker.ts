// A query deployed in its own process, for the upgrade-under-kill test: the
// test SIGKILLs version 1 mid-stream and deploys version 2 in its place. Both
// versions live here so that one toolchain compiles them, as in a real
// deploy (a stage's code hash is its functions' source text).
// Env: QUEEN_URL, SRC, SINK, QUERY_ID; VERSION (1 or 2); ACTION:
//   run (default): runs, prints `ready <uuid>`, then `commit <partition> <messages>` per committed cycle,
//     or `refused <json>` and exits if the broker refuses it; UPGRADE=keep-state passes that consent.
//   plan: prints `plan <json>` and exits.
import { Queen, QueenError, Stream, type SourceMessage } from 'queen-mq';

type Sale = { ts: string; n: number; via?: string };

const url = process.env.QUEEN_URL!;
const queen = new Queen({ url });

// Version 2's map adds a field the reducer ignores: the state keeps its meaning.
const enrich = process.env.VERSION === '2' ? (m: SourceMessage<Sale>) => ({ ...m.data, via: 'v2' }) : (m: SourceMessage<Sale>) => m.data;

const query = Stream.from<Sale>(queen.queue(process.env.SRC!))
  .map(enrich, { name: 'enrich' })
  .windowTumbling({ seconds: 3600, idleFlushMs: 0, eventTime: (s: Sale) => s.ts }, { name: 'per-hour' })
  .aggregate({ count: () => 1, sum: (s: Sale) => s.n })
  .to(queen.queue(process.env.SINK!));

const queryId = process.env.QUERY_ID!;
if (process.env.ACTION === 'plan') {
  process.stdout.write(`plan ${JSON.stringify(await query.plan({ queryId, url }))}\n`);
  process.exit(0);
}
try {
  const handle = await query.run({
    queryId,
    url,
    batchSize: 10,
    maxWaitMillis: 300,
    ...(process.env.UPGRADE === 'keep-state' ? { upgrade: 'keep-state' as const } : {}),
    onError: (e, info) => process.stderr.write(`error ${info.phase}: ${e.message}\n`),
  });
  handle.on('cycle:commit', (c) => process.stdout.write(`commit ${c.partition} ${c.messages}\n`));
  process.stdout.write(`ready ${handle.queryUuid}\n`);
} catch (e) {
  if (!(e instanceof QueenError)) throw e;
  process.stdout.write(`refused ${JSON.stringify({ status: e.status, code: e.code, message: e.message })}\n`);
  process.exit(0);
}
