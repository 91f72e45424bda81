export { Queen, QueenError, type QueenOptions } from '@queen-mq/client';
export { Stream } from './stream.js';
export type { RunOptions, RunHandle, RunMetrics, OperatorContext, SinkContext, SourceMessage, WindowOptions, WindowPlugin, SinkPlugin, GateStage } from '@queen-mq/core';
export { tumbling, type TumblingOptions } from '@queen-mq/window-tumbling';
export { queueSink, foreachSink, type QueueSinkOptions } from '@queen-mq/sinks';
