export { enqueue, enqueueOptionsSchema, type EnqueueOptions } from './enqueue.js';
export { ack, ackOptionsSchema } from './ack.js';
export type { PgClient } from './pg-client.js';
export { QueenError, type ErrorCode, type PushInput, type PushResult, type AckInput, type AckDefaults, type AckResult } from '@queen-mq/protocol';
