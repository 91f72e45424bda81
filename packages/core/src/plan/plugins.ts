/**
 * The plugin interfaces core owns. Every window kind, the gate and the sinks
 * are plain objects implementing these; core never imports a concrete one,
 * so a user can write a fifth window the same way the shipped ones are written.
 */

/** JSON as stored in state rows and hashed into the config hash. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** One window instance, `[start, end)` in epoch milliseconds. */
export interface WindowBounds {
  start: number;
  end: number;
}

/** What every window kind declares; see {@link WindowPlugin}. */
interface WindowPluginBase {
  /** Window kind, e.g. `'tumbling'`. Enters the config hash. */
  readonly kind: string;
  /** Structural options (sizes, units); enters the config hash. Never closures. */
  readonly shape: Json;
  /**
   * Key tag of the state rows, e.g. `'tumb:60'` (PROTOCOL §7.6). Optional:
   * omitted, core derives one from `kind` and `shape`. A given tag must not
   * contain U+001F nor start with `__`, and two windows of different kind or
   * shape may not share it in one process (checked when the window is built).
   */
  readonly tag?: string;
  /** Idle-flush interval used when the window options omit `idleFlushMs`. */
  readonly defaultIdleFlushMs: number;
  /** Windows containing `timestampMs` (epoch ms). Deterministic. */
  assign(timestampMs: number): WindowBounds[];
}

/**
 * A window whose instances never merge (tumbling, sliding, cron): windows are
 * `[start, end)` with an EXCLUSIVE end, one state row per window and key, and
 * a window closes once the clock reaches `end + grace`.
 */
export interface FixedWindowPlugin extends WindowPluginBase {
  readonly merging?: undefined;
  readonly merge?: undefined;
}

/**
 * The end rule of a merging window, stated by the plugin: ends are INCLUSIVE
 * (`[start, end]`; an event at exactly `end` still joins the window, which
 * closes only once the clock is PAST `end + grace`), and core keeps ONE open
 * row per key (`<tag>␟open␟<userKey>`) holding the key's open windows.
 */
export const MERGING_END_RULE = 'inclusive-ends-one-open-row-per-key' as const;

/** One window `merge` answers, with the indexes (into its input) of the windows it merged. */
export interface MergedWindow extends WindowBounds {
  /** Indexes into `merge`'s input of every window this one is made of (at least one). */
  readonly merged: readonly number[];
}

/**
 * A window whose instances merge (sessions). It states its end rule
 * ({@link MERGING_END_RULE}) and answers, for windows of one key, the merged
 * windows and which inputs each one merged; core never guesses merges. The
 * reducer after it must have a `merge` (accumulators of merged windows are combined).
 */
export interface MergingWindowPlugin extends WindowPluginBase {
  readonly merging: typeof MERGING_END_RULE;
  /**
   * Given windows of one key, answers every group that overlaps or touches
   * (inclusive ends) merged into one (its hull), each with the input indexes
   * it is made of; every input index appears in exactly one answer. Pure.
   */
  merge(windows: readonly WindowBounds[]): MergedWindow[];
}

/**
 * A window kind. `assign` maps a timestamp to the windows containing it;
 * core does everything else the same way for every window: state rows,
 * watermark, eventTime, gracePeriod, allowedLateness, onLate, ripeness,
 * emission and the idle-flush timer. A fixed window or a merging one: the
 * merging variant says so in `merging` (its end rule) — a `merge` alone is refused.
 */
export type WindowPlugin = FixedWindowPlugin | MergingWindowPlugin;

export function isMergingWindow(plugin: WindowPlugin): plugin is MergingWindowPlugin {
  return plugin.merging === MERGING_END_RULE;
}

/** What `eventTime` may return: a Date, epoch milliseconds or an ISO-8601 string. */
export type EventTimeValue = Date | number | string;

/** Options every window operator takes (on top of the plugin's own). */
export interface WindowOptions<T = any> {
  /**
   * How often (ms) the runner closes ripe windows of quiet partitions.
   * Defaults to the plugin's `defaultIdleFlushMs`; 0 disables the timer (a
   * window then closes only when the next message of its partition arrives).
   */
  idleFlushMs?: number;
  /** Seconds a window stays open after its end before it is emitted. Default 0. */
  gracePeriod?: number;
  /** Event time only: seconds the watermark trails the newest event time. Default 0. */
  allowedLateness?: number;
  /**
   * Event time only: what happens to an event whose window ended at or before
   * the watermark: dropped, emitted at once as a window of its own, or handed
   * to a sink plugin as a {@link LateRecord} (pushed in the same cycle
   * transaction as everything else). Default `'drop'`.
   */
  onLate?: LateOption;
  /**
   * Event time only, opt-in: once a partition has had no message for this
   * many ms (broker clock), its watermark advances with the broker's clock,
   * so its windows close without new events (see the core README, "Event-time
   * idleness"). Needs the idle-flush timer (idleFlushMs > 0).
   */
  idleTimeoutMs?: number;
  /** Event-time extractor; without it windows bucket on the broker's createdAt. */
  eventTime?: (value: T) => EventTimeValue | null | undefined;
}

/** What `onLate` takes: drop, include, or a sink plugin that receives each late event as a {@link LateRecord}. */
export type LateOption = 'drop' | 'include' | SinkPlugin;

/**
 * What an `onLate` sink receives for each late contribution: one source value
 * that was NOT folded into a window because that window had already been
 * emitted (its `end + gracePeriod` at or before the watermark from before the
 * batch; in processing time, at or before the clock at which the partition
 * last closed windows). An event late for several windows
 * (sliding) gives one record per window it missed; one on time for some of
 * its windows is folded into those and recorded for the others only.
 */
export interface LateRecord {
  /** The query's name (`run({ queryId })`). */
  queryId: string;
  /** Source partition name and id. */
  partition: string;
  partitionId: string;
  /** Source offset of the message the value came from. */
  offset: string;
  /** The state key: the keyBy result, else the source partition id. */
  key: string;
  /** The time the window was assigned from, epoch ms: the event time (processing time: the message's createdAt). */
  eventTimeMs: number;
  /** The window the value missed, epoch ms (`end` exclusive, inclusive for a merging window). */
  window: WindowBounds;
  /**
   * The watermark the event was judged against (the partition's, before its
   * batch), epoch ms; in processing time the clock at which the partition
   * last closed windows.
   */
  watermarkMs: number;
  /**
   * `watermarkMs − gracePeriod − window.end`: how far the watermark had
   * passed the moment the window closed (≥ 0; > 0 for a merging window,
   * whose end is inclusive).
   */
  latenessMs: number;
  /** The value as it reached the window (the message payload after the operators before the window). */
  value: unknown;
}

/**
 * Context handed to operators. Before a window the window fields are absent;
 * after a reducer they describe the emitted window.
 */
export interface OperatorContext {
  /** Source partition name. */
  partition: string;
  /** Source partition id (UUID string). */
  partitionId: string;
  /** The state key: the keyBy result, else the source partition id. */
  key: string;
  /** Source offset of the message (absent on window emits). */
  offset?: string;
  /** Full state key of the emitted window (post-window operators). */
  windowKey?: string;
  /** Window start, epoch ms (post-window operators). */
  windowStart?: number;
  /** Window end, epoch ms, exclusive (post-window operators). */
  windowEnd?: number;
}

/** A per-value transform: map, filter, flatMap, or a user operator. */
export interface TransformStage {
  /** Operator kind; enters the config hash (e.g. `'map'`). */
  readonly kind: string;
  /** Structural options of a custom operator; enters the config hash. */
  readonly shape?: Json;
  /** The source text of the user's function (e.g. a map's): hashed into the stage's code hash, never the config hash. */
  readonly code?: string;
  /** Returns the values this input becomes: `[]` drops it, several fan out. */
  transform(value: any, ctx: OperatorContext): readonly unknown[];
}

/** Changes the state key. Must come before a window or a gate. */
export interface KeyByStage {
  readonly kind: 'keyBy';
  /** The source text of the user's function (e.g. a map's): hashed into the stage's code hash, never the config hash. */
  readonly code?: string;
  key(value: any, ctx: OperatorContext): string | number;
}

/** What a gate sees: `state` is the key's row (mutable; discarded on deny). The gate may be async. */
export interface GateContext {
  /**
   * The key's state row: `{}` for a key that has none. Mutate it in place
   * (`ctx.state.remaining -= 1`) or reassign it (`ctx.state = {remaining: 9}`):
   * what the gate leaves here when it allows is what commits. Any JSON value
   * is a row (an object, array, number, string or boolean); `null` or
   * `undefined` deletes the key's row, so its next evaluation sees `{}`. On a
   * deny, or a throw, every change of this evaluation is discarded, in place
   * or by reassignment.
   */
  state: any;
  /**
   * The broker's clock (epoch ms) when the message is evaluated, as the
   * runner knows it (see BrokerClock: a lower bound, corrected for the
   * runner's own skew) — the clock that stamps `createdAt`.
   */
  streamTimeMs: number;
  key: string;
  partition: string;
  partitionId: string;
}

/** The answer of a gate: a boolean, or `{allow}`. Anything else is an error. */
export type GateDecision = boolean | { allow: boolean };

/**
 * A gate (packages/gate builds these): a pipe stage evaluated per message in
 * source order. Allow commits the state mutation and passes the value on;
 * deny discards the mutation, stops the batch and keeps the denied tail leased.
 */
export interface GateStage {
  readonly kind: 'gate';
  readonly shape?: Json;
  /** The source text of the user's function (e.g. a map's): hashed into the stage's code hash, never the config hash. */
  readonly code?: string;
  evaluate(value: any, ctx: GateContext): GateDecision | Promise<GateDecision>;
}

/** Anything `.pipe()` accepts. */
export type PipeStage = TransformStage | KeyByStage | GateStage;

/** A message the sink wants pushed; core adds the deterministic transactionId. */
export interface SinkPushItem {
  queue: string;
  partition?: string;
  payload: unknown;
}

/** Context of a sink call: the source partition and, for window emits, the window. */
export type SinkContext = OperatorContext;

/**
 * Where values leave the chain. A sink either turns a value into push items
 * that commit inside the cycle (exactly-once), or runs an effect before the
 * cycle commits (at-least-once).
 */
export interface SinkPlugin {
  /** Sink kind, e.g. `'queue'`. Enters the config hash. */
  readonly kind: string;
  /** Structural options (the sink queue name); enters the config hash. */
  readonly shape: Json;
  /** The queue registered as the query's sink_queue, if any. */
  readonly sinkQueue?: string;
  toPushItems?(value: unknown, ctx: SinkContext): SinkPushItem[];
  effect?(value: unknown, ctx: SinkContext): void | Promise<void>;
}

/** A sink plugin: a kind, and push items (exactly-once) or an effect (at-least-once). */
export function isSinkPlugin(value: unknown): value is SinkPlugin {
  const v = value as Partial<SinkPlugin> | null;
  return !!v && typeof v === 'object' && typeof v.kind === 'string' && v.kind !== '' && (typeof v.toPushItems === 'function' || typeof v.effect === 'function');
}

/** A closed window leaving the reducer. */
export interface WindowEmit {
  identity: string;
  windowKey: string;
  windowStart: number;
  windowEnd: number;
  userKey: string;
  value: unknown;
}
