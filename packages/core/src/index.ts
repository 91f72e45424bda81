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
export { isGateStage, isKeyByStage, isMergingWindow, MERGING_END_RULE } from './plugins.js';
export type { SourceMessage } from './source-message.js';
export { aggregateReducer, reduceReducer, type Reducer, type Extractor, type ReduceOptions } from './reducer.js';
export { mapStage, filterStage, flatMapStage, keyByStage } from './operators.js';
export { compileChain, type CompiledQuery } from './compile.js';
export { chainStructure, type ChainStage } from './chain.js';
export { resolveWindowOptions, windowOptionsSchema, type ResolvedWindowOptions } from './window-options.js';
export { parseWindowPluginOptions, splitWindowOptions, type OwnWindowOptions } from './window-plugin-options.js';
export { configHash, canonicalJson } from './config-hash.js';
export { chainError } from './chain-error.js';
export { z, option, parseOptions, optionRows, optionsMarkdown, type OptionMeta, type OptionRow, type OptionsSchema } from '@queen-mq/protocol';
export { SEP, WATERMARK_KEY, escapeKeyPart, unescapeKeyPart, isoMs, windowStateKey, openWindowStateKey, windowKeyPrefix, gateStateKey } from './keys.js';
export { toEpochMs } from './event-time.js';
export { sinkTransactionId, messageIdentity, lateIdentity } from './transaction-id.js';
export { runQuery, stepQuery, runOptionsSchema, type RunOptions, type RunHandle, type SteppedRun } from './runner.js';
export type { RunMetrics, ErrorInfo, ErrorPhase, RunnerLogger } from './runner-context.js';
export { BrokerClock } from './broker-clock.js';
export { RunnerEmitter, type RunnerEvents, type RunnerEventName } from './events.js';
export type { CycleRequest, CycleResponse, StateOp, StateRow, StateGetRequest, RegisterRequest, RegisterResponse } from './wire.js';
