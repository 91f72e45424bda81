import { option, z } from '@queen-mq/protocol';
import type { Dispatcher } from 'undici';
import type { PoppedMessage } from '@queen-mq/protocol';

// The client's option objects as schemas: `new Queen(options)` and
// `queue.consume(handler, options)` validate with them (an unknown or
// mistyped option throws VALIDATION_FAILED naming it), and the README's
// options tables are rendered from them.

const ms = (description: string, fallback: string, rule = 'must be a number ≥ 0') =>
  option(z.number().min(0).optional(), { description, rule, type: 'number (ms)', default: fallback });
const fn = <T>(description: string, type: string) => option(z.custom<T>((v) => typeof v === 'function').optional(), { description, rule: 'must be a function', type });

/** {@link QueenOptions} as a schema. */
export const queenOptionsSchema = z.object({
  url: option(z.string().min(1), { description: 'Broker base URL, e.g. `http://localhost:6632`', rule: 'is required: the broker base URL' }),
  bearerToken: option(z.string().optional(), { description: 'Sent as `Authorization: Bearer <token>` (API key or JWT) when set', rule: 'must be a string' }),
  timeoutMs: option(z.number().positive().optional(), { description: 'Per-attempt timeout; a long-poll pop gets its own wait on top', rule: 'must be a positive number', type: 'number (ms)', default: '30000' }),
  retries: option(z.number().int().min(0).optional(), { description: 'Extra attempts for a retryable failure', rule: 'must be an integer ≥ 0', type: 'integer', default: '3' }),
  retryBaseMs: ms('First backoff delay; doubles per attempt, full jitter', '100'),
  retryMaxMs: ms('Largest backoff delay', '3000'),
  failoverWaitMs: ms('How long a call safe to resend keeps being resent, past `retries`, while the broker answers 503 `DB_UNAVAILABLE`/`DB_OUTCOME_UNKNOWN` (a database failover)', '30000'),
  dispatcher: option(z.custom<Dispatcher>((v) => typeof v === 'object' && v !== null && typeof (v as Dispatcher).dispatch === 'function').optional(), {
    description: "An undici dispatcher to use instead of the client's own keep-alive Agent",
    rule: 'must be an undici Dispatcher',
    type: 'undici Dispatcher',
  }),
});

/** {@link ConsumeOptions} as a schema. */
export const consumeOptionsSchema = z.object({
  batch: option(z.number().int().positive().optional(), { description: 'Messages per pop', rule: 'must be a positive integer', type: 'integer', default: '1' }),
  concurrency: option(z.number().int().positive().optional(), { description: 'Parallel pop loops (each holds at most one batch at a time)', rule: 'must be a positive integer', type: 'integer', default: '1' }),
  consumerGroup: option(z.string().min(1).optional(), { description: 'Consumer group', rule: 'must be a non-empty string', default: 'the queue-mode group' }),
  wait: ms('Long-poll bound per pop; 0 polls without waiting, pausing `idleMs` when empty', '30000'),
  idleMs: ms('Pause after an empty non-waiting pop', '250'),
  autoAck: option(z.boolean().optional(), { description: 'Messages are acked by the pop itself: a handler throw is only reported', rule: 'must be a boolean', default: 'false' }),
  partitions: option(z.number().int().positive().optional(), { description: 'Partitions one pop may claim (queue-wide consumers)', rule: 'must be a positive integer', type: 'integer', default: '1' }),
  each: option(z.boolean().optional(), { description: '`handler(message)` per message (true) or `handler(messages)` per batch (false)', rule: 'must be a boolean', default: 'true' }),
  signal: option(z.custom<AbortSignal>((v) => v instanceof AbortSignal).optional(), { description: 'Aborting it stops the consumer like `stop()`', rule: 'must be an AbortSignal', type: 'AbortSignal' }),
  onError: fn<(err: unknown, messages?: PoppedMessage[]) => void>(
    'Called with a handler throw, a failed pop or ack, or an ack item the broker refused. Default: console.error',
    '(err, messages?) => void',
  ),
});
