// The stream runner under test, in its own process so the checker can
// SIGKILL it at any moment. Builds the chain of one variant (env VARIANT,
// JSON) with the public builder of `queen-mq`, against the broker at
// QUEEN_URL (the fault proxy). Prints `ready <queryUuid>` once registered.
import { Queen, Stream } from 'queen-mq';
import { cronExpressionOf, SESSION_GAP_S, TUMBLING_S, type Variant } from './variant.js';

const url = process.env.QUEEN_URL!;
const variant = JSON.parse(process.env.VARIANT!) as Variant;
const queen = new Queen({ url });
const source = Stream.from(queen.queue(process.env.SRC!));
const sink = queen.queue(process.env.SINK!);
const runOptions = {
  queryId: process.env.QUERY_ID!,
  url,
  batchSize: 100,
  maxPartitions: 2,
  maxWaitMillis: 300,
  onError: (e: Error, info: { phase: string }) => process.stderr.write(`error ${info.phase}: ${e.message}\n`),
};

function gateChain() {
  const budget = variant.budget!;
  const young = variant.denyYoungerMs ?? 0;
  // The same budget written two ways: in-place mutation, and reassignment of ctx.state.
  return source
    .gate((msg: any, ctx: any) => {
      if (young > 0 && ctx.streamTimeMs - Date.parse(msg.createdAt) < young) return false;
      if (variant.gateStyle === 'mutate') {
        ctx.state.used ??= 0;
        if (ctx.state.used >= budget) return false;
        ctx.state.used += 1;
        msg.data.seq = ctx.state.used;
        return true;
      }
      const used: number = ctx.state.used ?? 0;
      if (used >= budget) return false;
      ctx.state = { used: used + 1 };
      msg.data.seq = used + 1;
      return true;
    })
    .to(sink);
}

function windowChain() {
  const common: any = { idleFlushMs: variant.idleFlushMs, gracePeriod: variant.graceS };
  if (variant.time === 'event') {
    common.eventTime = (m: any) => m.data.ts;
    common.allowedLateness = variant.allowedLatenessS;
    common.onLate = variant.onLate === 'sink' ? queen.queue(process.env.LATE!) : variant.onLate;
  }
  const keyed = source.keyBy((m: any) => m.data.k);
  const windowed =
    variant.kind === 'tumbling'
      ? keyed.windowTumbling({ seconds: TUMBLING_S, ...common })
      : variant.kind === 'sliding'
        ? keyed.windowSliding({ size: variant.sliding!.sizeMs / 1000, slide: variant.sliding!.slideMs / 1000, ...common })
        : variant.kind === 'session'
          ? keyed.windowSession({ gap: SESSION_GAP_S, ...common })
          : variant.kind === 'cron-unit'
            ? keyed.windowCron({ every: 'second', ...common })
            : keyed.windowCron({ expression: cronExpressionOf(variant), timeZone: variant.timeZone, ...common });
  return windowed
    .aggregate({ count: () => 1, sum: (m: any) => m.n })
    .map((agg: any, ctx: any) => ({ ...agg, key: ctx.key, start: ctx.windowStart, end: ctx.windowEnd, window: ctx.windowKey }))
    .to(sink);
}

function joinChain() {
  return source
    .join(queen.queue(process.env.RIGHT!), {
      within: { ms: variant.withinMs! },
      gracePeriod: variant.graceS,
      // Processing time: held records expire on the broker's clock once the queues are quiet (ignored in event time).
      idleFlushMs: variant.idleFlushMs,
      type: variant.joinType!,
      key: (d: any) => d.k,
      ...(variant.time === 'event' ? { eventTime: (d: any) => d.ts } : {}),
      select: (l: any, r: any) => ({ l: l.id, r: r ? r.id : null }),
    })
    .to(sink);
}

const handle = await (variant.kind === 'gate' ? gateChain() : variant.kind === 'join' ? joinChain() : windowChain()).run(runOptions as any);
handle.on('lease:lost', (l: any) => process.stderr.write(`lease lost ${l.partitionId} ${l.code}\n`));
process.stdout.write(`ready ${handle.queryUuid}\n`);
setInterval(() => process.stdout.write(`metrics ${JSON.stringify(handle.metrics())}\n`), 500).unref();
process.on('SIGTERM', () => void handle.stop().then(() => process.exit(0)));
if (process.env.EO_DEBUG) {
  // for tuning schedules: when flushes and cycles commit, against the whole second
  const at = () => `${new Date().toISOString().slice(17, 23)}`;
  handle.on('window:flush', (f: any) => process.stderr.write(`${at()} flush ${f.partition} emits=${f.emits}\n`));
  handle.on('cycle:commit', (c: any) => process.stderr.write(`${at()} cycle ${c.partition} messages=${c.messages} emits=${c.emits}\n`));
}
