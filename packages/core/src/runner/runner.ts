import { Queen, QueenError } from '@queen-mq/client';
import type { CompiledQuery } from '../plan/compile.js';
import type { RunMetrics, RunnerContext, TouchedPartition } from '../context/runner-context.js';
import { BrokerClock } from '../context/broker-clock.js';
import { RunnerEmitter } from '../context/events.js';
import { PartitionLocks } from '../context/partition-lock.js';
import { StreamsApi } from '../context/state-api.js';
import { joinPartnerPop, popLoop, popOptions, processPop, type PopSource } from './pop-loop.js';
import { flushLoop, flushTouchedPartitions, seedTouchedFromSource } from '../windows/idle-flush.js';
import { flushJoinShards, joinFlushLoop, seedJoinShards } from '../joins/join-idle-flush.js';
import { resolveRunOptions, type RunOptions, type RunSettings } from './run-options.js';
import { deadLetterQueueOf } from '../windows/emit-dead-letter.js';
import { migratePartitions } from './state-migration.js';
import type { RegisterResponse } from '../context/wire.js';

export { runOptionsSchema, type RunOptions } from './run-options.js';

// runQuery in named parts: check the options, register the query, build the
// runner context, start the pop loop and the idle-flush loop, hand back a
// handle that stops them.

/** A running query. Events: `cycle:commit`, `window:flush`, `lease:lost`, `message:dead-lettered`, `emit:dead-lettered`. */
export interface RunHandle extends RunnerEmitter {
  /** The query's name (`options.queryId`). */
  readonly name: string;
  /** The server's UUID of the query. */
  readonly queryUuid: string;
  /** Where dead-lettered window emits go (`streams.<name>.dead-letters`, see `emit:dead-lettered`). */
  readonly deadLetterQueue: string;
  /** Stops popping, lets the cycle in flight finish, closes the client. */
  stop(): Promise<void>;
  /** A snapshot of the counters. */
  metrics(): RunMetrics;
}

/**
 * Registers the query (POST /streams/v1/queries) and answers its UUID. A
 * changed chain without `reset` is a 409, rethrown with the way out.
 */
async function registerQuery(api: StreamsApi, plan: CompiledQuery, settings: RunSettings): Promise<RegisterResponse> {
  try {
    return await api.register({
      name: settings.queryId,
      source_queue: plan.sourceQueue,
      ...(plan.sinkQueue ? { sink_queue: plan.sinkQueue } : {}),
      config_hash: plan.configHash,
      reset: settings.reset,
      stages: [...plan.stages],
      ...(settings.upgrade ? { upgrade: settings.upgrade } : {}),
      migrate: plan.migration ? [plan.migration.stage] : [],
      state_ttl_seconds: plan.stateTtlSeconds ?? null,
    });
  } catch (err) {
    if (err instanceof QueenError && err.code === 'CONFIG_HASH_MISMATCH') {
      throw new QueenError(
        'CONFIG_HASH_MISMATCH',
        `config_hash mismatch: stream query "${settings.queryId}" is registered with a different chain; run with { reset: true } to replace it (this wipes its state)`,
        { status: 409, extra: err.extra, cause: err },
      );
    }
    throw err;
  }
}

function zeroMetrics(): RunMetrics {
  return {
    cyclesTotal: 0,
    flushCyclesTotal: 0,
    messagesTotal: 0,
    lateEventsTotal: 0,
    errorsTotal: 0,
    gateAllowsTotal: 0,
    gateDenialsTotal: 0,
    poisonRetriesTotal: 0,
    messagesDeadLetteredTotal: 0,
    emitsDeadLetteredTotal: 0,
    windowsReemittedTotal: 0,
    sinkFullTotal: 0,
  };
}

/**
 * A join's idle flush runs in processing time with idleFlushMs > 0, and only
 * against a broker that guards it: one that ignores `flush_sources` would
 * commit the flush without looking at the source queues.
 */
function joinIdleFlushMs(plan: CompiledQuery, reg: RegisterResponse, settings: RunSettings): number {
  const every = plan.join?.options.idleFlushMs ?? 0;
  if (every <= 0) return 0;
  if (reg.flush_sources) return every;
  settings.logger.warn(`query "${settings.queryId}": this broker does not guard a join's idle flush (flush_sources), so held records leave only when the other queue's time moves; upgrade the broker for the idle flush`);
  return 0;
}

/** What the pop loop, the cycles and the idle flush of one runner share. */
function createRunnerContext(plan: CompiledQuery, api: StreamsApi, reg: RegisterResponse, settings: RunSettings, stopper: AbortController): RunnerContext {
  const metrics = zeroMetrics();
  const stopped = stopper.signal;
  return {
    plan,
    queryId: reg.query_id,
    version: reg.version,
    halt: () => stopper.abort(),
    queryName: settings.queryId,
    consumerGroup: settings.consumerGroup,
    api,
    locks: new PartitionLocks(),
    events: new RunnerEmitter(),
    metrics,
    touched: new Map<string, TouchedPartition>(),
    joinHeld: new Map(),
    joinIdleFlushMs: joinIdleFlushMs(plan, reg, settings),
    clock: new BrokerClock(settings.clock),
    logger: settings.logger,
    isStopped: () => stopped.aborted,
    signal: stopped,
    report(err, info) {
      metrics.errorsTotal += 1;
      const error = err instanceof Error ? err : new Error(String(err));
      if (settings.onError) {
        try {
          settings.onError(error, info);
        } catch {
          /* an onError that throws must not kill the loop */
        }
      }
    },
  };
}

/**
 * Registers the query and, when the registered version left partitions to
 * migrate, migrates them (or waits for the runner that does) before anything
 * runs; answers the runner context. Closes the client on failure.
 */
async function startRunner(queen: Queen, plan: CompiledQuery, settings: RunSettings): Promise<{ rt: RunnerContext; stopper: AbortController }> {
  const api = new StreamsApi(queen);
  const stopper = new AbortController();
  try {
    if (plan.join && plan.sourcePartition === null) await checkPartitionedAlike(queen, plan.sourceQueue, plan.join.rightQueue);
    const reg = await registerQuery(api, plan, settings);
    if (reg.pending_migrations.length > 0 && reg.version) {
      await migratePartitions({ api, queryId: reg.query_id, version: reg.version, signal: settings.abortSignal ?? stopper.signal }, plan, reg.pending_migrations);
    }
    const rt = createRunnerContext(plan, api, reg, settings, stopper);
    if (plan.join) rt.joinPartner = joinPartnerPop(rt, queen, settings);
    return { rt, stopper };
  } catch (err) {
    await queen.close();
    throw err;
  }
}

/** The partition names of a queue's first page (none when the queue does not exist yet). */
async function partitionNames(queen: Queen, queue: string): Promise<string[]> {
  try {
    const detail = await queen.api.queueGet({ params: { queue }, query: { limit: 1000 }, idempotent: true });
    return detail.partitions.map((p) => p.name);
  } catch (err) {
    if (err instanceof QueenError && err.code === 'QUEUE_NOT_FOUND') return [];
    throw err;
  }
}

/**
 * A join pairs a partition with its namesake: two queues that both have
 * partitions and not one name in common are partitioned differently (every
 * left record would pair with nothing), and the run is refused. A name on
 * one side only is fine (its other side has not been written yet).
 */
async function checkPartitionedAlike(queen: Queen, left: string, right: string): Promise<void> {
  const [l, r] = await Promise.all([partitionNames(queen, left), partitionNames(queen, right)]);
  if (l.length === 0 || r.length === 0 || l.some((name) => r.includes(name))) return;
  throw new QueenError(
    'VALIDATION_FAILED',
    `.join(): "${left}" and "${right}" are not partitioned alike (a partition joins only its namesake of the other queue): no partition name in common (${JSON.stringify(l.slice(0, 3))}… against ${JSON.stringify(r.slice(0, 3))}…)`,
    { details: [{ field: 'join', message: 'the two queues have no partition name in common' }] },
  );
}

/** A pinned source pops through the partition route: only that partition is ever claimed. */
function popSource(queen: Queen, plan: CompiledQuery): PopSource {
  const queue = queen.queue(plan.sourceQueue);
  return plan.sourcePartition === null ? queue : queue.partition(plan.sourcePartition);
}

/** A join's right queue, pinned like the source. */
function rightSource(queen: Queen, plan: CompiledQuery): PopSource {
  const queue = queen.queue(plan.join!.rightQueue);
  return plan.join!.rightPartition === null ? queue : queue.partition(plan.join!.rightPartition);
}

/**
 * The handle over running loops: `stop()` (or the abort signal) stops popping,
 * waits for the cycles in flight, then closes the client; idempotent.
 */
function runHandle(rt: RunnerContext, queen: Queen, queryUuid: string, loops: Promise<unknown>, stopper: AbortController, abortSignal?: AbortSignal): RunHandle {
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      stopper.abort();
      await loops.catch(() => undefined);
      await queen.close();
    })();
    return stopping;
  };
  if (abortSignal) {
    if (abortSignal.aborted) void stop();
    else abortSignal.addEventListener('abort', () => void stop(), { once: true });
  }
  return Object.assign(rt.events, {
    name: rt.queryName,
    queryUuid,
    deadLetterQueue: deadLetterQueueOf(rt.queryName),
    stop,
    metrics: (): RunMetrics => ({ ...rt.metrics }),
  }) as RunHandle;
}

/**
 * Registers the compiled query and starts its loops in this process:
 * pop (long-poll, up to maxPartitions partitions) → one cycle per partition,
 * and, for windows with idleFlushMs > 0, the idle-flush timer. Resolves once
 * registered; rejects on a changed chain without `reset` (409) or bad options
 * (VALIDATION_FAILED naming the option, before any request).
 */
export async function runQuery(plan: CompiledQuery, options: RunOptions): Promise<RunHandle> {
  const settings = resolveRunOptions(options);
  const queen = new Queen({ url: settings.url, bearerToken: settings.bearerToken });
  const { rt, stopper } = await startRunner(queen, plan, settings);
  const queryUuid = rt.queryId;
  const loops = Promise.all(
    plan.join
      ? [
          popLoop(rt, queen, popSource(queen, plan), settings, stopper.signal, 'left'),
          popLoop(rt, queen, rightSource(queen, plan), settings, stopper.signal, 'right'),
          joinFlushLoop(rt, queen, stopper.signal),
        ]
      : [popLoop(rt, queen, popSource(queen, plan), settings, stopper.signal), flushLoop(rt, queen, stopper.signal)],
  );
  return runHandle(rt, queen, queryUuid, loops, stopper, settings.abortSignal);
}

/** A query run by hand (see {@link stepQuery}). */
export interface SteppedRun extends RunHandle {
  /** The consumer group on the source. */
  readonly consumerGroup: string;
  /** The runner's view of the broker's clock. */
  readonly clock: BrokerClock;
  /** Pops once without waiting and runs that pop's cycles; answers how many messages it popped (0: nothing to pop). */
  step(): Promise<number>;
  /** One idle-flush pass, as the idleFlushMs timer runs it (none without a window or processing-time join, or with idleFlushMs 0); answers the partitions it deferred. */
  flush(): Promise<number>;
}

/**
 * TEST SEAM (@queen-mq/testing's testStream): the query of {@link runQuery},
 * registered the same way and with the same runner context, but with no loop
 * started: the caller pops (`step`, the pop loop's own processPop) and fires
 * the idle flush (`flush`, the timer's own pass) when it wants to.
 */
export async function stepQuery(plan: CompiledQuery, options: RunOptions): Promise<SteppedRun> {
  const settings = resolveRunOptions(options);
  const queen = new Queen({ url: settings.url, bearerToken: settings.bearerToken });
  const { rt, stopper } = await startRunner(queen, plan, settings);
  const queryUuid = rt.queryId;
  const source = popSource(queen, plan);
  const flushes = plan.join ? rt.joinIdleFlushMs > 0 : plan.shape === 'window' && (plan.window?.options.idleFlushMs ?? 0) > 0;
  let seeded = false;
  return Object.assign(runHandle(rt, queen, queryUuid, Promise.resolve(), stopper, settings.abortSignal), {
    consumerGroup: settings.consumerGroup,
    clock: rt.clock,
    async step(): Promise<number> {
      if (plan.join) {
        // A join pops each queue once: the left, then the right.
        let popped = 0;
        for (const [side, from] of [['left', source], ['right', rightSource(queen, plan)]] as const) {
          const pop = await from.pop({ ...popOptions(settings), batch: settings.batchSize, wait: false });
          if (!pop || pop.messages.length === 0) continue;
          await processPop(rt, queen, pop, rt.clock.local(), side);
          popped += pop.messages.length;
        }
        return popped;
      }
      const pop = await source.pop({ ...popOptions(settings), batch: settings.batchSize, wait: false });
      if (!pop || pop.messages.length === 0) return 0;
      await processPop(rt, queen, pop, rt.clock.local());
      return pop.messages.length;
    },
    async flush(): Promise<number> {
      if (!flushes) return 0;
      if (!seeded) {
        await (plan.join ? seedJoinShards(rt, queen) : seedTouchedFromSource(rt, queen));
        seeded = true;
      }
      return plan.join ? flushJoinShards(rt, queen) : flushTouchedPartitions(rt, queen);
    },
  });
}
