export { Queen, QueenError, type QueenOptions, type PoppedMessage, type TransactionBuilder, type TransactionResult } from '@queen-mq/client';
export { Stream } from './stream.js';
// Loading the KV's client half gives every Queen its `queen.kv` and every
// transaction its `tx.kv`; the broker half (@queen-mq/kv/broker) stays out.
export { KvClient, kvClient, TransactionKv, type KvSetOptions, type KvIncrOptions, type KvListOptions } from '@queen-mq/kv';
export type { RunOptions, RunHandle, RunMetrics, OperatorContext, SinkContext, SourceMessage, WindowOptions, WindowPlugin, SinkPlugin, GateStage } from '@queen-mq/core';
export type { StageOptions, MigrateState, MigratedRow, PlanOptions, QueryPlan } from '@queen-mq/core';
export { tumbling, type TumblingOptions } from '@queen-mq/window-tumbling';
export { sliding, type SlidingOptions } from '@queen-mq/window-sliding';
export { session, type SessionOptions } from '@queen-mq/window-session';
export { cron, type CronOptions, type CronUnitOptions, type CronExpressionOptions, type CronUnit } from '@queen-mq/window-cron';
export { queueSink, foreachSink, type QueueSinkOptions } from '@queen-mq/sinks';
export { gate, tokenBucket, slidingWindowLimit, type GateFn, type TokenBucketOptions, type SlidingWindowLimitOptions } from '@queen-mq/gate';
