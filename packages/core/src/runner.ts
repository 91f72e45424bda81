import { Queen, QueenError } from '@queen-mq/client';
import type { PopResponse } from '@queen-mq/protocol';
import type { CompiledQuery } from './compile.js';
import type { SourceMessage } from './source-message.js';
import type { ErrorInfo, RunMetrics, RunnerContext, RunnerLogger, TouchedPartition } from './runner-context.js';
import { BrokerClock } from './broker-clock.js';
import { chainError } from './chain-error.js';
import { RunnerEmitter } from './events.js';
import { PartitionLocks } from './partition-lock.js';
import { StreamsApi } from './state-api.js';
import { processPartitionBatch, type PartitionBatch } from './cycle.js';
import { flushTouchedPartitions, seedTouchedFromSource } from './idle-flush.js';

/** Options of `stream.run()`. */
export interface RunOptions {
  /** The query's name: registers it, names its consumer group, scopes its state. */
  queryId: string;
  /** Broker base URL, e.g. `http://localhost:6632`. */
  url: string;
  /** Sent as `Authorization: Bearer <token>`. */
  bearerToken?: string;
  /** Messages per pop, across partitions. Default 200. */
  batchSize?: number;
  /** Partitions one pop may claim. Default 4. */
  maxPartitions?: number;
  /** Long-poll bound of a pop, ms. Default 1000. */
  maxWaitMillis?: number;
  /** Wipe the query's state and accept a changed chain (the answer to a 409). Default false. */
  reset?: boolean;
  /** Consumer group on the source. Default `streams.<queryId>`. */
  consumerGroup?: string;
  /** Called for every failure; the runner keeps going (a failed batch returns with its lease). */
  onError?: (error: Error, info: ErrorInfo) => void;
  /** Stops the runner when aborted (like `handle.stop()`). */
  abortSignal?: AbortSignal;
  /** Where log lines go (a dead-lettered poison message); `warn(message)`. Default `console`. */
  logger?: RunnerLogger;
  /**
   * TEST SEAM: the runner's own clock, epoch ms (default `Date.now`). The
   * runner never closes a processing-time window on it directly: it learns
   * the broker's offset from what the broker stamps (see BrokerClock), so a
   * clock shifted by ±30 s, or a fake clock jumping ahead, exercises exactly
   * the arithmetic a skewed machine would.
   */
  clock?: () => number;
}

/** A running query. Events: `cycle:commit`, `window:flush`, `lease:lost`, `message:dead-lettered`. */
export interface RunHandle extends RunnerEmitter {
  /** The query's name (`options.queryId`). */
  readonly name: string;
  /** The server's UUID of the query. */
  readonly queryUuid: string;
  /** Stops popping, lets the cycle in flight finish, closes the client. */
  stop(): Promise<void>;
  /** A snapshot of the counters. */
  metrics(): RunMetrics;
}

/** Seconds a lease is pushed forward while a cycle on it is still being computed. */
const LEASE_EXTEND_SECONDS = 5;
const LEASE_EXTEND_EVERY_MS = 1000;
/**
 * Popped batches processed at once by the pop loop: one committing while the
 * next pop long-polls (see popLoop), plus one more so a pop that returns
 * before the previous batch committed can start right away.
 */
const POPS_IN_FLIGHT = 2;
/** Delay of the one follow-up flush pass after a tick that had to defer partitions mid-cycle. */
const FLUSH_RETRY_MS = 200;

function intOption(name: string, value: unknown, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw chainError(`run(): ${name} must be an integer in ${min}..${max}, got ${JSON.stringify(value)}`);
  }
  return value;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

function groupByPartition(pop: PopResponse): PartitionBatch[] {
  const byId = new Map<string, PartitionBatch>();
  for (const m of pop.messages) {
    let b = byId.get(m.partitionId);
    if (!b) {
      b = { partitionId: m.partitionId, partition: m.partition, leaseId: m.leaseId || pop.leaseId, messages: [] };
      byId.set(m.partitionId, b);
    }
    b.messages.push(m as SourceMessage);
  }
  return [...byId.values()];
}

/**
 * Registers the compiled query and starts its loops in this process:
 * pop (long-poll, up to maxPartitions partitions) → one cycle per partition,
 * and, for windows with idleFlushMs > 0, the idle-flush timer. Resolves once
 * registered; rejects on a changed chain without `reset` (409) or bad options.
 */
export async function runQuery(plan: CompiledQuery, options: RunOptions): Promise<RunHandle> {
  if (!options || typeof options.queryId !== 'string' || options.queryId === '') throw chainError('run(): queryId is required');
  if (typeof options.url !== 'string' || options.url === '') throw chainError('run(): url is required');
  const batchSize = intOption('batchSize', options.batchSize, 200, 1, 10000);
  const maxPartitions = intOption('maxPartitions', options.maxPartitions, 4, 1, 1000);
  const maxWaitMillis = intOption('maxWaitMillis', options.maxWaitMillis, 1000, 0, 300000);
  const consumerGroup = options.consumerGroup ?? `streams.${options.queryId}`;
  if (options.clock !== undefined && typeof options.clock !== 'function') throw chainError('run(): clock must be a function returning epoch ms');
  if (options.logger !== undefined && typeof options.logger?.warn !== 'function') throw chainError('run(): logger must have a warn(message) method');

  const queen = new Queen({ url: options.url, bearerToken: options.bearerToken });
  const api = new StreamsApi(queen);
  let queryUuid: string;
  try {
    const reg = await api.register({
      name: options.queryId,
      source_queue: plan.sourceQueue,
      ...(plan.sinkQueue ? { sink_queue: plan.sinkQueue } : {}),
      config_hash: plan.configHash,
      reset: options.reset === true,
    });
    queryUuid = reg.query_id;
  } catch (err) {
    await queen.close();
    if (err instanceof QueenError && err.code === 'CONFIG_HASH_MISMATCH') {
      throw new QueenError(
        'CONFIG_HASH_MISMATCH',
        `stream query "${options.queryId}" is registered with a different chain; run with { reset: true } to replace it (this wipes its state)`,
        { status: 409, extra: err.extra, cause: err },
      );
    }
    throw err;
  }

  const events = new RunnerEmitter();
  const metrics: RunMetrics = {
    cyclesTotal: 0,
    flushCyclesTotal: 0,
    messagesTotal: 0,
    lateEventsTotal: 0,
    errorsTotal: 0,
    gateAllowsTotal: 0,
    gateDenialsTotal: 0,
    poisonRetriesTotal: 0,
    messagesDeadLetteredTotal: 0,
  };
  const stopper = new AbortController();
  const rt: RunnerContext = {
    plan,
    queryId: queryUuid,
    queryName: options.queryId,
    consumerGroup,
    api,
    locks: new PartitionLocks(),
    events,
    metrics,
    touched: new Map<string, TouchedPartition>(),
    clock: new BrokerClock(options.clock),
    logger: options.logger ?? console,
    isStopped: () => stopper.signal.aborted,
    report(err, info) {
      metrics.errorsTotal += 1;
      const error = err instanceof Error ? err : new Error(String(err));
      if (options.onError) {
        try {
          options.onError(error, info);
        } catch {
          /* an onError that throws must not kill the loop */
        }
      }
    },
  };
  // A pinned source pops through the partition route: only that partition is ever claimed.
  const source = plan.sourcePartition === null ? queen.queue(plan.sourceQueue) : queen.queue(plan.sourceQueue).partition(plan.sourcePartition);

  // Extends the pop's lease only while one of its partitions is still being
  // computed; a lease left held by a gate deny is never extended.
  function extendWhileBusy(leaseId: string): () => void {
    const timer = setInterval(() => {
      queen.extendLease(leaseId, LEASE_EXTEND_SECONDS).then(
        (r) => {
          if (!r.success) clearInterval(timer);
        },
        (err) => rt.report(err, { phase: 'lease-extend' }),
      );
    }, LEASE_EXTEND_EVERY_MS);
    timer.unref();
    return () => clearInterval(timer);
  }

  /** One pop's batches: each partition's cycle under its partition lock, the partitions concurrently. */
  async function processPop(pop: PopResponse, receivedAt: number): Promise<void> {
    // PostgreSQL stamped every popped message before the pop answered: a sample of the broker's clock.
    let newest = -Infinity;
    for (const m of pop.messages) newest = Math.max(newest, Date.parse(m.createdAt));
    rt.clock.observe(newest, receivedAt);
    const batches = groupByPartition(pop);
    const stopExtending = extendWhileBusy(pop.leaseId);
    try {
      await Promise.all(batches.map((b) => rt.locks.run(b.partitionId, () => processPartitionBatch(rt, b))));
    } finally {
      stopExtending();
    }
  }

  // Pipelining: the next pop (a long-poll round trip) runs while the batches
  // of earlier pops are still reading state and committing, instead of after.
  // Order per partition is kept without any bookkeeping here: a pop only
  // claims partitions whose lease is free, and a batch's lease is released by
  // its own committing cycle (release_lease) — so a partition comes back in a
  // later pop only once its previous batch committed (or its lease expired,
  // i.e. the batch is redelivered anyway). The partition lock then runs that
  // later batch strictly after the earlier one's code has finished, and the
  // idle flush stays serialised with both. At most POPS_IN_FLIGHT popped
  // batches are processed at once, which bounds memory.
  async function popLoop(): Promise<void> {
    const inFlight = new Set<Promise<void>>();
    let failures = 0;
    try {
      while (!stopper.signal.aborted) {
        if (inFlight.size >= POPS_IN_FLIGHT) {
          await Promise.race(inFlight);
          continue;
        }
        let pop: PopResponse | null;
        let receivedAt = 0;
        try {
          pop = await source.pop({ batch: batchSize, wait: true, timeout: maxWaitMillis, consumerGroup, partitions: maxPartitions, signal: stopper.signal });
          receivedAt = rt.clock.local();
          failures = 0;
        } catch (err) {
          if (stopper.signal.aborted) return;
          rt.report(err, { phase: 'pop' });
          failures += 1;
          await sleep(Math.min(5000, 100 * 2 ** Math.min(failures, 6)), stopper.signal);
          continue;
        }
        if (!pop || pop.messages.length === 0) continue;
        const done: Promise<void> = processPop(pop, receivedAt).finally(() => inFlight.delete(done));
        inFlight.add(done);
      }
    } finally {
      // stop() lets the cycles in flight finish.
      await Promise.allSettled(inFlight);
    }
  }

  async function flushLoop(): Promise<void> {
    const every = plan.window?.options.idleFlushMs ?? 0;
    if (plan.shape !== 'window' || every <= 0) return;
    try {
      await seedTouchedFromSource(rt, queen);
    } catch (err) {
      rt.report(err, { phase: 'flush' });
    }
    // Fixed-rate ticks: a pass's own duration does not push the next tick back
    // (a window ending just after a tick still waits at most one interval).
    let tick = Date.now();
    while (!stopper.signal.aborted) {
      tick += every;
      const wait = tick - Date.now();
      if (wait > 0) await sleep(wait, stopper.signal);
      else tick = Date.now(); // a pass overran a whole interval: do not burst to catch up
      if (stopper.signal.aborted) return;
      const deferred = await flushTouchedPartitions(rt, queen, options.url, options.bearerToken);
      // A partition whose last batch was still committing at the tick would
      // otherwise wait a whole interval more: look once more shortly after.
      const retryIn = Math.min(FLUSH_RETRY_MS, every / 4);
      if (deferred > 0 && tick + every - Date.now() > retryIn * 2) {
        await sleep(retryIn, stopper.signal);
        if (stopper.signal.aborted) return;
        await flushTouchedPartitions(rt, queen, options.url, options.bearerToken);
      }
    }
  }

  const loops = Promise.all([popLoop(), flushLoop()]);
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      stopper.abort();
      await loops.catch(() => undefined);
      await queen.close();
    })();
    return stopping;
  };
  if (options.abortSignal) {
    if (options.abortSignal.aborted) void stop();
    else options.abortSignal.addEventListener('abort', () => void stop(), { once: true });
  }

  return Object.assign(events, {
    name: options.queryId,
    queryUuid,
    stop,
    metrics: (): RunMetrics => ({ ...metrics }),
  }) as RunHandle;
}
