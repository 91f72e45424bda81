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
} from './plugins.js';
export { MERGING_END_RULE } from './plugins.js';
export type { SourceMessage } from './source-message.js';
export type { Extractor, ReduceOptions } from './reducer.js';
export type { CompiledQuery } from './compile.js';
export { windowOptionsSchema } from './window-options.js';
export { parseWindowPluginOptions, splitWindowOptions } from './window-plugin-options.js';
export { chainError } from './chain-error.js';
export { z, option, parseOptions, optionsMarkdown, type OptionsSchema } from '@queen-mq/protocol';
export { stepQuery, runOptionsSchema, type RunOptions, type RunHandle, type SteppedRun } from './runner.js';
export type { RunMetrics, ErrorInfo, ErrorPhase, RunnerLogger } from './runner-context.js';
export type { RunnerEvents, RunnerEventName } from './events.js';
export type { StageOptions, MigrateState, MigratedRow } from './stage-options.js';
export type { PlanOptions, QueryPlan } from './plan.js';
