export { Queen, type QueenOptions, type AckOptions } from './queen.js';
export { QueueHandle, type PopOptions } from './queue-handle.js';
export { consume, type Consumer, type ConsumeOptions, type MessageHandler, type BatchHandler } from './consume.js';
export { withQuery, type RequestOptions, type QueryValue } from './transport.js';
export { errorFromResponse } from './errors.js';
export { QueenError, isPushInput, type PushInput, type AckInput, type ErrorCode, type PopResponse, type PoppedMessage, type PushResult, type AckResult, type AckStatus, type LeaseExtendResult, type ScheduleBody, type Schedule, type ScheduleUpsertResult } from '@queen-mq/protocol';
export { TransactionBuilder, type TransactionResult, type TransactionPushResult, type TransactionAckResult, type TransactionAckOptions, type TransactionKvOp, type TimerInput, type QueueRef } from './transaction.js';
export { queenOptionsSchema, consumeOptionsSchema } from './options.js';
export { routeTable, callRoute, type RouteCalls, type RouteCallName, type RouteInput, type RouteOutput, type RouteTable } from './route-calls.js';
export { routePath } from '@queen-mq/protocol';
// The client's tracing helpers, shared with @queen-mq/core's runner spans (one set of attributes, one off switch).
export { tracingEnabled, startMessagingSpan, endSpan, traceparentOf, traceIdAsUuid, consumerParent, type MessagingSpan, type MessagingOperation } from './tracing.js';
