import type { OperatorContext, PipeStage, SinkPlugin, WindowOptions, WindowPlugin } from './plan/plugins.js';
import { aggregateReducer, reduceReducer, type Extractor, type ReduceOptions } from './plan/reducer.js';
import { checkAppend, checkWindowPlugin, type ChainStage } from './plan/chain.js';
import { resolveWindowOptions } from './plan/window-options.js';
import { compileChain, type CompiledQuery } from './plan/compile.js';
import { filterStage, flatMapStage, keyByStage, mapStage } from './plan/operators.js';
import { chainError } from './plan/chain-error.js';
import { runQuery, type RunHandle, type RunOptions } from './runner/runner.js';
import type { SourceMessage } from './context/source-message.js';

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

  /** Generic operator: map/filter/flatMap/keyBy are built on it, so is the gate. */
  pipe<U = T>(stage: PipeStage): Stream<U> {
    return this.append<U>({ type: 'pipe', stage });
  }

  map<U>(fn: (value: T, ctx: OperatorContext) => U): Stream<U> {
    this.assertOpen('.map()');
    return this.pipe<U>(mapStage(fn));
  }

  filter(fn: (value: T, ctx: OperatorContext) => unknown): Stream<T> {
    this.assertOpen('.filter()');
    return this.pipe<T>(filterStage(fn));
  }

  flatMap<U>(fn: (value: T, ctx: OperatorContext) => Iterable<U> | null | undefined): Stream<U> {
    this.assertOpen('.flatMap()');
    return this.pipe<U>(flatMapStage(fn));
  }

  /** Changes the state key (default: the source partition id). Before the window or gate. */
  keyBy(fn: (value: T, ctx: OperatorContext) => string | number): Stream<T> {
    this.assertOpen('.keyBy()');
    return this.pipe<T>(keyByStage(fn));
  }

  /** A window of any kind; must be followed by `.reduce()` or `.aggregate()`. */
  window(plugin: WindowPlugin, options?: WindowOptions<T>): Stream<T> {
    this.assertOpen('the window');
    const tag = checkWindowPlugin(plugin);
    return this.append<T>({ type: 'window', plugin, tag, options: resolveWindowOptions(plugin, options) });
  }

  /**
   * Folds each window with `fn`, starting from a deep copy of `initial` (JSON).
   * `options.merge` combines two accumulators when windows merge (required after a session window).
   */
  reduce<A>(fn: (acc: A, value: Payload<T>) => A, initial: A, options?: ReduceOptions<A>): Stream<ReduceResult<A>> {
    this.assertOpen('.reduce()');
    return this.append<ReduceResult<A>>({ type: 'reduce', reducer: reduceReducer(fn, initial, options) });
  }

  /** Named aggregates: count, sum, min, max, avg; any other name sums numbers. */
  aggregate<S extends Record<string, Extractor<Payload<T>>>>(spec: S): Stream<AggregateResult<S>> {
    this.assertOpen('.aggregate()');
    return this.append<AggregateResult<S>>({ type: 'reduce', reducer: aggregateReducer(spec) });
  }

  /** Ends the chain with a sink plugin. Nothing may follow it. */
  to(sink: SinkPlugin): Stream<T> {
    return this.append<T>({ type: 'sink', sink });
  }

  /** Validates the whole chain and computes its config hash; no HTTP. */
  compile(): CompiledQuery {
    return compileChain(this.source.name, this.stages, this.source.partitionName);
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
