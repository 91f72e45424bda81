export { Stream, type QueueRef, type Payload, type AggregateResult, type ReduceResult } from './stream.js';
export type {
  Json,
  WindowBounds,
  WindowPlugin,
  FixedWindowPlugin,
  MergingWindowPlugin,
  MergedWindow,
  WindowOptions,
  LateOption,
  LateRecord,
  EventTimeValue,
  OperatorContext,
  TransformStage,
  KeyByStage,
  GateStage,
  GateContext,
  GateDecision,
  PipeStage,
  SinkPlugin,
  SinkPushItem,
  SinkContext,
} from './plan/plugins.js';
export { MERGING_END_RULE } from './plan/plugins.js';
export type { SourceMessage } from './context/source-message.js';
export type { Extractor, ReduceOptions } from './plan/reducer.js';
export type { CompiledQuery } from './plan/compile.js';
export { windowOptionsSchema } from './plan/window-options.js';
export { parseWindowPluginOptions, splitWindowOptions } from './plan/window-plugin-options.js';
export { chainError } from './plan/chain-error.js';
export { z, option, parseOptions, optionsMarkdown, type OptionsSchema } from '@queen-mq/protocol';
export { stepQuery, runOptionsSchema, type RunOptions, type RunHandle, type SteppedRun } from './runner/runner.js';
export type { RunMetrics, ErrorInfo, ErrorPhase, RunnerLogger } from './context/runner-context.js';
export type { RunnerEvents, RunnerEventName } from './context/events.js';
export type { StageOptions, MigrateState, MigratedRow } from './plan/stage-options.js';
export type { PlanOptions, QueryPlan } from './runner/query-plan.js';
export type { JoinOptions, JoinDuration, PerSide } from './plan/join-options.js';
export { joinOptionsSchema } from './plan/join-options.js';
export type { LookupOptions, LookupMissing } from './plan/lookup.js';
export { isBookkeepingKey } from './plan/keys.js';
export { joinShardId } from './joins/join-shard.js';
