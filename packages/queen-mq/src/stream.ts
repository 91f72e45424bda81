import {
  type StageOptions,
  type PlanOptions,
  type QueryPlan,
  Stream as CoreStream,
  splitWindowOptions,
  type AggregateResult,
  type CompiledQuery,
  type Extractor,
  type LateOption,
  type OperatorContext,
  type OptionsSchema,
  type Payload,
  type PipeStage,
  type QueueRef,
  type ReduceResult,
  type ReduceOptions,
  type RunHandle,
  type RunOptions,
  type SinkContext,
  type SinkPlugin,
  type SourceMessage,
  type WindowOptions,
  type WindowPlugin,
  type JoinOptions,
  type LookupOptions,
} from '@queen-mq/core';
import { tumbling, tumblingOptionsSchema, type TumblingOptions } from '@queen-mq/window-tumbling';
import { sliding, slidingOptionsSchema, type SlidingOptions } from '@queen-mq/window-sliding';
import { session, sessionOptionsSchema, type SessionOptions } from '@queen-mq/window-session';
import { cron, cronOptionsSchema, type CronOptions } from '@queen-mq/window-cron';
import { foreachSink, queueSink, type QueueSinkOptions } from '@queen-mq/sinks';
import { gate, type GateFn } from '@queen-mq/gate';

function isSinkPlugin(value: unknown): value is SinkPlugin {
  const v = value as Partial<SinkPlugin> | null;
  return !!v && typeof v === 'object' && typeof v.kind === 'string' && (typeof v.toPushItems === 'function' || typeof v.effect === 'function');
}

/** Window options whose `onLate` may also be a queue handle: `onLate: queen.queue('late-orders')` (distributes over a union like CronOptions). */
type WithLateQueue<O> = O extends unknown ? Omit<O, 'onLate'> & { onLate?: LateOption | QueueRef } : never;

/**
 * `onLate: queen.queue(name)` as the queue sink it stands for (core knows no
 * concrete sink, so the sugar makes it, like `.to(queue)`); anything else is
 * passed on for the window's own validation.
 */
function lateQueueAsSink<O>(options: WithLateQueue<O>): O {
  const late = (options as { onLate?: unknown } | undefined)?.onLate;
  if (late === null || typeof late !== 'object' || isSinkPlugin(late) || typeof (late as QueueRef).name !== 'string') return options as O;
  return { ...options, onLate: queueSink(late as QueueRef) } as O;
}

/**
 * The Stream builder with every default plugin: the generic forms of
 * `@queen-mq/core` (`window`, `pipe`, `to(sinkPlugin)`) plus the sugar
 * (`windowTumbling`, `to(queue, opts)`, `foreach`). Immutable: every call
 * returns a new Stream; an invalid chain throws at the offending call.
 */
export class Stream<T = SourceMessage> {
  /** The generic chain this sugar delegates to. */
  readonly core: CoreStream<T>;

  private constructor(core: CoreStream<T>) {
    this.core = core;
    Object.freeze(this);
  }

  /** A stream over a queue: `Stream.from(queen.queue('orders'))`. */
  static from<D = any>(queue: QueueRef): Stream<SourceMessage<D>> {
    return new Stream(CoreStream.from<D>(queue));
  }

  pipe<U = T>(stage: PipeStage, options?: StageOptions): Stream<U> {
    return new Stream(this.core.pipe<U>(stage, options));
  }

  map<U>(fn: (value: T, ctx: OperatorContext) => U, options?: StageOptions): Stream<U> {
    return new Stream(this.core.map(fn, options));
  }

  filter(fn: (value: T, ctx: OperatorContext) => unknown, options?: StageOptions): Stream<T> {
    return new Stream(this.core.filter(fn, options));
  }

  flatMap<U>(fn: (value: T, ctx: OperatorContext) => Iterable<U> | null | undefined, options?: StageOptions): Stream<U> {
    return new Stream(this.core.flatMap(fn, options));
  }

  keyBy(fn: (value: T, ctx: OperatorContext) => string | number, options?: StageOptions): Stream<T> {
    return new Stream(this.core.keyBy(fn, options));
  }

  /**
   * Interval join with another queue partitioned alike (see @queen-mq/core):
   * `Stream.from(queen.queue('orders')).join(queen.queue('payments'), { within: { minutes: 5 }, key, type: 'left' })`.
   */
  join<R = any, O = { left: Payload<T>; right: R | null }>(right: QueueRef, options: JoinOptions<Payload<T>, R, O>, stage?: StageOptions): Stream<O> {
    return new Stream(this.core.join<R, O>(right, options, stage));
  }

  /** Enrich from the KV, read in the cycle's transaction (see @queen-mq/core): `.lookup('customers', (m) => m.data.customerId, { as: 'customer' })`. */
  lookup<F extends string = 'lookup'>(
    namespace: string,
    key: (value: T, ctx: OperatorContext) => string | number | null | undefined,
    options?: LookupOptions & { as?: F },
    stage?: StageOptions,
  ): Stream<Payload<T> & { [K in F]: any }> {
    return new Stream(this.core.lookup<F>(namespace, key, options, stage));
  }

  /**
   * Any window plugin (generic form). Here `onLate` may also be a queue
   * handle: late events go to that queue as late records (see @queen-mq/core).
   */
  window(plugin: WindowPlugin, options?: WithLateQueue<WindowOptions<T>>, stage?: StageOptions): Stream<T> {
    return new Stream(this.core.window(plugin, options && lateQueueAsSink<WindowOptions<T>>(options), stage));
  }

  /** A window factory's sugar: its options checked and split from the window's (an onLate queue made a sink), then `window`. */
  private windowOf<O extends WindowOptions<T>>(where: string, schema: OptionsSchema, factory: (own: ReturnType<typeof splitWindowOptions<O>>['plugin']) => WindowPlugin, options: WithLateQueue<O>, stage?: StageOptions): Stream<T> {
    const { plugin, window } = splitWindowOptions(where, schema, lateQueueAsSink<O>(options));
    return this.window(factory(plugin), window as WindowOptions<T>, stage);
  }

  /** Fixed, epoch-aligned buckets of `seconds` (idleFlushMs default 5000). */
  windowTumbling(options: WithLateQueue<TumblingOptions<T>>, stage?: StageOptions): Stream<T> {
    return this.windowOf<TumblingOptions<T>>('tumbling window', tumblingOptionsSchema, tumbling, options, stage);
  }

  /** Overlapping windows of `size` s hopping every `slide` s (idleFlushMs default 5000). */
  windowSliding(options: WithLateQueue<SlidingOptions<T>>, stage?: StageOptions): Stream<T> {
    return this.windowOf<SlidingOptions<T>>('sliding window', slidingOptionsSchema, sliding, options, stage);
  }

  /** One window per key while events arrive within `gap` s (merging; idleFlushMs default 1000). */
  windowSession(options: WithLateQueue<SessionOptions<T>>, stage?: StageOptions): Stream<T> {
    return this.windowOf<SessionOptions<T>>('session window', sessionOptionsSchema, session, options, stage);
  }

  /**
   * Cron buckets (idleFlushMs default 30000): UTC units, `{ every:
   * 'second'|'minute'|'hour'|'day'|'week' }`, or a cron expression in a time
   * zone, `{ expression: '0 9-17 * * MON-FRI', timeZone: 'Europe/Berlin' }`,
   * where each fire time opens a window that lasts until the next one.
   */
  windowCron(options: WithLateQueue<CronOptions<T>>, stage?: StageOptions): Stream<T> {
    return this.windowOf<CronOptions<T>>('cron window', cronOptionsSchema, cron, options, stage);
  }

  /**
   * Per-message admission (@queen-mq/gate): `fn(value, ctx)` with `ctx.state`
   * the key's row. Allow passes the value on and commits the mutation; deny
   * discards it, acks the allowed prefix and keeps the denied tail leased.
   */
  gate(fn: GateFn<T>, options?: StageOptions): Stream<T> {
    return this.pipe<T>(gate(fn), options);
  }

  reduce<A>(fn: (acc: A, value: Payload<T>) => A, initial: A, options?: ReduceOptions<A> & StageOptions): Stream<ReduceResult<A>> {
    return new Stream(this.core.reduce(fn, initial, options));
  }

  aggregate<S extends Record<string, Extractor<Payload<T>>>>(spec: S, options?: StageOptions): Stream<AggregateResult<S>> {
    return new Stream(this.core.aggregate(spec, options));
  }

  /**
   * Sink: a queue handle (exactly-once push inside the cycle; `partition`
   * defaults to the source partition name) or any sink plugin.
   */
  to(target: QueueRef | SinkPlugin, options?: QueueSinkOptions<Payload<T>>, stage?: StageOptions): Stream<T> {
    return new Stream(this.core.to(isSinkPlugin(target) ? target : queueSink(target, options), stage));
  }

  /** Calls `fn` per value, then acks: AT-LEAST-ONCE (see @queen-mq/sinks). */
  foreach(fn: (value: Payload<T>, ctx: SinkContext) => void | Promise<void>, stage?: StageOptions): Stream<T> {
    return new Stream(this.core.to(foreachSink(fn), stage));
  }

  compile(): CompiledQuery {
    return this.core.compile();
  }

  /** Compares this chain with the registered query's, stage by stage (see @queen-mq/core, "Deploying a new version of a query"). */
  plan(options: PlanOptions): Promise<QueryPlan> {
    return this.core.plan(options);
  }

  run(options: RunOptions): Promise<RunHandle> {
    return this.core.run(options);
  }
}
