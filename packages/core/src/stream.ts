import type { OperatorContext, PipeStage, SinkPlugin, WindowOptions, WindowPlugin } from './plan/plugins.js';
import { aggregateReducer, reduceReducer, type Extractor, type ReduceOptions } from './plan/reducer.js';
import { checkAppend, checkWindowPlugin, type ChainStage } from './plan/chain.js';
import { resolveWindowOptions } from './plan/window-options.js';
import { compileChain, type CompiledQuery } from './plan/compile.js';
import { filterStage, flatMapStage, keyByStage, mapStage } from './plan/operators.js';
import { chainError } from './plan/chain-error.js';
import { runQuery, type RunHandle, type RunOptions } from './runner/runner.js';
import type { SourceMessage } from './context/source-message.js';
import { codeOf, stageMeta, type StageOptions } from './plan/stage-options.js';
import { planQuery, type PlanOptions, type QueryPlan } from './runner/query-plan.js';
import { resolveJoinOptions, type JoinOptions } from './plan/join-options.js';
import { lookupStage, type LookupOptions } from './plan/lookup.js';

/**
 * Anything with a queue name: the client's `queen.queue(name)` handle fits,
 * and so does a pinned `queen.queue(name).partition(p)` (its `partitionName`).
 */
export interface QueueRef {
  readonly name: string;
  /** Pinned to one partition: a stream source reads only it, a queue sink writes only to it. */
  readonly partitionName?: string;
}

/**
 * What a reducer or a sink sees for a value: a value that is still the source
 * message stands for its payload (`msg.data`); anything an operator produced
 * is used as is.
 */
export type Payload<T> = T extends SourceMessage<infer D> ? D : T;

/** The emitted payload of `aggregate(spec)`. */
export type AggregateResult<S> = { [K in keyof S]: number | null };

/** The emitted payload of `reduce(fn, initial)`: a plain-object accumulator as is, else `{value}`. */
export type ReduceResult<A> = A extends readonly unknown[] ? { value: A } : A extends object ? A : { value: A };

/**
 * An immutable operator chain over one source queue. Every call returns a
 * new Stream; a builder call that makes the chain invalid throws
 * synchronously (QueenError VALIDATION_FAILED), before any HTTP request.
 */
export class Stream<T = SourceMessage> {
  readonly source: QueueRef;
  readonly stages: readonly ChainStage[];

  protected constructor(source: QueueRef, stages: readonly ChainStage[]) {
    this.source = source;
    this.stages = stages;
    Object.freeze(this);
  }

  /**
   * A stream over a queue (the client's queue handle or `{name}`); a handle
   * pinned to one partition (`queue.partition('p')`, or `{name, partitionName}`)
   * makes the stream read only that partition.
   */
  static from<D = any>(queue: QueueRef): Stream<SourceMessage<D>> {
    if (!queue || typeof queue.name !== 'string' || queue.name === '') throw chainError('Stream.from() takes a queue handle with a name');
    const partition = queue.partitionName;
    if (partition !== undefined && (typeof partition !== 'string' || partition === '')) {
      throw chainError('Stream.from(): a partition-pinned source needs a non-empty partition name');
    }
    return new Stream<SourceMessage<D>>(queue, []);
  }

  private append<U>(stage: ChainStage): Stream<U> {
    checkAppend(this.stages, stage);
    return new Stream<U>(this.source, [...this.stages, stage]);
  }

  /**
   * Generic operator: map/filter/flatMap/keyBy are built on it, so is the
   * gate. `stage` options: its stable `name`, and `migrateState` for a gate.
   */
  pipe<U = T>(stage: PipeStage, options?: StageOptions): Stream<U> {
    const s = stage as { kind?: unknown; code?: string; transform?: unknown; key?: unknown; evaluate?: unknown; shape?: unknown } | null;
    const code = s?.code ?? codeOf(s?.transform ?? s?.key ?? s?.evaluate, s?.shape);
    return this.append<U>({ type: 'pipe', stage, ...stageMeta(`.${String(s?.kind ?? 'pipe')}()`, options, code, s?.kind === 'gate', s?.kind === 'gate') });
  }

  map<U>(fn: (value: T, ctx: OperatorContext) => U, options?: StageOptions): Stream<U> {
    this.assertOpen('.map()');
    return this.pipe<U>(mapStage(fn), options);
  }

  filter(fn: (value: T, ctx: OperatorContext) => unknown, options?: StageOptions): Stream<T> {
    this.assertOpen('.filter()');
    return this.pipe<T>(filterStage(fn), options);
  }

  flatMap<U>(fn: (value: T, ctx: OperatorContext) => Iterable<U> | null | undefined, options?: StageOptions): Stream<U> {
    this.assertOpen('.flatMap()');
    return this.pipe<U>(flatMapStage(fn), options);
  }

  /** Changes the state key (default: the source partition id). Before the window or gate. */
  keyBy(fn: (value: T, ctx: OperatorContext) => string | number, options?: StageOptions): Stream<T> {
    this.assertOpen('.keyBy()');
    return this.pipe<T>(keyByStage(fn), options);
  }

  /**
   * Interval join with another queue partitioned alike (the same partition
   * names: a partition of one pairs only with its namesake of the other).
   * Emits `select(left, right)` once for every couple of records, one of each
   * queue, with equal `key` and times at most `within` apart; `type: 'left'`
   * also emits `select(left, null)` for a left record that paired with
   * nothing, once its bound has passed. Right after `Stream.from()`; then
   * map, filter, flatMap and a sink. The functions see each message's payload.
   */
  join<R = any, O = { left: Payload<T>; right: R | null }>(right: QueueRef, options: JoinOptions<Payload<T>, R, O>, stage?: StageOptions): Stream<O> {
    this.assertOpen('.join()');
    if (!right || typeof right.name !== 'string' || right.name === '') throw chainError('.join() takes a queue handle with a name');
    if (right.name === this.source.name) throw chainError('.join() pairs two queues: the right queue must not be the source queue');
    const leftPinned = this.source.partitionName;
    if ((right.partitionName ?? null) !== (leftPinned ?? null)) {
      throw chainError(
        `.join(): both queues are read partition by partition, a partition pairing with its namesake; pin both to the same partition or neither (left: ${leftPinned === undefined ? 'every partition' : JSON.stringify(leftPinned)}, right: ${right.partitionName === undefined ? 'every partition' : JSON.stringify(right.partitionName)})`,
      );
    }
    const resolved = resolveJoinOptions(options as JoinOptions);
    const code = codeOf(resolved.keyLeft, resolved.keyRight, resolved.select, resolved.eventTimeLeft, resolved.eventTimeRight, resolved.withinMs, resolved.graceMs);
    const meta = stageMeta('.join()', stage, code, true);
    return this.append<O>({ type: 'join', rightQueue: right.name, ...(right.partitionName !== undefined ? { rightPartition: right.partitionName } : {}), options: resolved, ...meta });
  }

  /**
   * Enrich: adds the KV entry of `key(value)` in `namespace` to each value as
   * the field `options.as` (default `lookup`). The entries are read once per
   * key and batch, and the cycle commits only if each is still the version
   * read, so every output used a value committed at its cycle's commit.
   * `missing`: 'null' (default) adds null, 'skip' drops the value, 'dlq' fails
   * the message (redelivered, then dead-lettered past the queue's retryLimit).
   * For a stream without a window, gate or join.
   */
  lookup<F extends string = 'lookup'>(
    namespace: string,
    key: (value: T, ctx: OperatorContext) => string | number | null | undefined,
    options?: LookupOptions & { as?: F },
    stage?: StageOptions,
  ): Stream<Payload<T> & { [K in F]: any }> {
    this.assertOpen('.lookup()');
    const lookup = lookupStage(namespace, key, options);
    return this.append({ type: 'lookup', lookup, ...stageMeta('.lookup()', stage, codeOf(key), false) });
  }

  /** A window of any kind; must be followed by `.reduce()` or `.aggregate()`. */
  window(plugin: WindowPlugin, options?: WindowOptions<T>, stage?: StageOptions): Stream<T> {
    this.assertOpen('the window');
    const tag = checkWindowPlugin(plugin);
    const meta = stageMeta('the window', stage, codeOf(options?.eventTime), true);
    return this.append<T>({ type: 'window', plugin, tag, options: resolveWindowOptions(plugin, options), ...meta });
  }

  /**
   * Folds each window with `fn`, starting from a deep copy of `initial` (JSON).
   * `options.merge` combines two accumulators when windows merge (required after a session window).
   */
  reduce<A>(fn: (acc: A, value: Payload<T>) => A, initial: A, options?: ReduceOptions<A> & StageOptions): Stream<ReduceResult<A>> {
    this.assertOpen('.reduce()');
    const reducer = reduceReducer(fn, initial, options);
    const meta = stageMeta('.reduce()', options && { name: options.name, migrateState: options.migrateState }, codeOf(fn, initial, options?.merge), true);
    return this.append<ReduceResult<A>>({ type: 'reduce', reducer, ...meta });
  }

  /** Named aggregates: count, sum, min, max, avg; any other name sums numbers. */
  aggregate<S extends Record<string, Extractor<Payload<T>>>>(spec: S, options?: StageOptions): Stream<AggregateResult<S>> {
    this.assertOpen('.aggregate()');
    const reducer = aggregateReducer(spec);
    const code = codeOf(...Object.keys(spec).sort().flatMap((k) => [k, spec[k]]));
    return this.append<AggregateResult<S>>({ type: 'reduce', reducer, ...stageMeta('.aggregate()', options, code, true) });
  }

  /** Ends the chain with a sink plugin. Nothing may follow it. */
  to(sink: SinkPlugin, options?: StageOptions): Stream<T> {
    const s = sink as Partial<SinkPlugin> | null;
    return this.append<T>({ type: 'sink', sink, ...stageMeta('.to()', options, codeOf(s?.toPushItems, s?.effect, s?.shape), false) });
  }

  /** Validates the whole chain and computes its config hash; no HTTP. */
  compile(): CompiledQuery {
    return compileChain(this.source.name, this.stages, this.source.partitionName);
  }

  /**
   * Compares this chain with the registered query's, stage by stage, without
   * changing anything (it is recorded as the proposed version, which
   * `queen streams plan <queryId>` shows): unchanged, code-changed,
   * state-compatible, state-incompatible, added, removed, and the state rows
   * each keeps or drops.
   */
  plan(options: PlanOptions): Promise<QueryPlan> {
    return planQuery(this.compile(), options);
  }

  /** Registers the query and starts the cycle loop in this process. */
  async run(options: RunOptions): Promise<RunHandle> {
    const compiled = this.compile();
    return runQuery(compiled, options);
  }

  /** The "must be the last" rule fires before a builder's own argument checks. */
  private assertOpen(label: string): void {
    const sink = this.stages.find((s) => s.type === 'sink');
    if (sink && sink.type === 'sink') {
      throw chainError(`${label} cannot follow ${sink.sink.kind === 'foreach' ? '.foreach()' : '.to()'}: a sink must be the last operator`);
    }
  }
}
