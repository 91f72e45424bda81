import { option, parseOptions, z } from '@queen-mq/protocol';
import type { ErrorInfo, RunnerLogger } from '../context/runner-context.js';

/** Options of `stream.run()`. The table in the README is rendered from {@link runOptionsSchema}. */
export interface RunOptions {
  /** The query's name: registers it, names its consumer group, scopes its state. */
  queryId: string;
  /** Broker base URL, e.g. `http://localhost:6632`. */
  url: string;
  /** Sent as `Authorization: Bearer <token>`. */
  bearerToken?: string;
  /** Messages per pop, across partitions. Default 200. */
  batchSize?: number;
  /** Partitions one pop may claim. Default 4. */
  maxPartitions?: number;
  /** Long-poll bound of a pop, ms. Default 1000. */
  maxWaitMillis?: number;
  /** Wipe the query's state and accept a changed chain (the answer to a 409). Default false. */
  reset?: boolean;
  /**
   * `'keep-state'`: resume a query whose new version changes what its state
   * folds (the plan says `keep-state`) with its rows as they are. A
   * state-incompatible stage still needs `reset` or a `migrateState`.
   */
  upgrade?: 'keep-state';
  /**
   * Where a NEW query starts reading its source: `'beginning'` (every
   * retained message), `'now'` (only messages pushed from now on), or an
   * instant (ISO-8601 string or Date: messages created at or after it).
   * Recorded with the query's consumer group at its first pop; a query that
   * already has a cursor carries on from it. Default: the broker's default
   * for a new group.
   */
  from?: 'beginning' | 'now' | string | Date;
  /** Paces the runner: at most this many messages a second on average (a backfill that must not starve live queries). Default: unpaced. */
  maxMessagesPerSecond?: number;
  /** Consumer group on the source. Default `streams.<queryId>`. */
  consumerGroup?: string;
  /** Called for every failure; the runner keeps going (a failed batch returns with its lease). */
  onError?: (error: Error, info: ErrorInfo) => void;
  /** Stops the runner when aborted (like `handle.stop()`). */
  abortSignal?: AbortSignal;
  /** Where log lines go (a dead-lettered poison message); `warn(message)`. Default `console`. */
  logger?: RunnerLogger;
  /**
   * TEST SEAM: the runner's own clock, epoch ms (default `Date.now`). The
   * runner never closes a processing-time window on it directly: it learns
   * the broker's offset from what the broker stamps (see BrokerClock), so a
   * clock shifted by ±30 s, or a fake clock jumping ahead, exercises exactly
   * the arithmetic a skewed machine would.
   */
  clock?: () => number;
}

const fn = <T>(description: string, type: string, rule = 'must be a function') =>
  option(z.custom<T>((v) => typeof v === 'function').optional(), { description, rule, type });
const int = (min: number, max: number, fallback: number, description: string, unit = '') =>
  option(z.number().int().min(min).max(max).optional(), { description, rule: `must be an integer in ${min}..${max}`, type: `integer${unit}`, default: String(fallback) });

/** {@link RunOptions} as a schema: validates `run()` and renders its options table. */
export const runOptionsSchema = z.object({
  queryId: option(z.string().min(1), { description: "The query's name: registers it, names its consumer group, scopes its state", rule: 'is required (a non-empty string)' }),
  url: option(z.string().min(1), { description: 'Broker base URL, e.g. `http://localhost:6632`', rule: 'is required (a non-empty string)' }),
  bearerToken: option(z.string().optional(), { description: 'Sent as `Authorization: Bearer <token>`', rule: 'must be a string' }),
  batchSize: int(1, 10000, 200, 'Messages per pop, across partitions'),
  maxPartitions: int(1, 1000, 4, 'Partitions one pop may claim'),
  maxWaitMillis: int(0, 300000, 1000, 'Long-poll bound of a pop', ' (ms)'),
  reset: option(z.boolean().optional(), { description: "Wipe the query's state and accept a changed chain (the answer to a 409 `CONFIG_HASH_MISMATCH`)", rule: 'must be a boolean', default: 'false' }),
  upgrade: option(z.enum(['keep-state']).optional(), {
    description: "`'keep-state'`: resume a new version whose plan says `keep-state` (state-compatible stages) with its state rows as they are; see \"Deploying a new version of a query\"",
    rule: "must be 'keep-state'",
    type: "'keep-state'",
  }),
  from: option(
    z.union([z.literal('beginning'), z.literal('now'), z.date(), z.string().refine((s) => !Number.isNaN(Date.parse(s)), 'must be an ISO-8601 instant')]).optional(),
    {
      description: "Where a new query starts reading: `'beginning'`, `'now'`, or an instant (messages created at or after it); recorded at the group's first pop, ignored once it has a cursor",
      rule: "must be 'beginning', 'now', an ISO-8601 instant or a Date",
      type: "'beginning' | 'now' | ISO string | Date",
      default: "the broker's default for a new group",
    },
  ),
  maxMessagesPerSecond: option(z.number().positive().max(1_000_000).optional(), {
    description: 'Paces the runner to at most this many messages a second on average (a backfill beside live queries)',
    rule: 'must be a number in (0, 1000000]',
    type: 'number',
    default: 'unpaced',
  }),
  consumerGroup: option(z.string().min(1).optional(), { description: 'Consumer group on the source', rule: 'must be a non-empty string', default: '`streams.<queryId>`' }),
  onError: fn<(error: Error, info: ErrorInfo) => void>(
    'Called for every failure; the runner keeps going (a failed batch returns with its lease). `info`: `{phase, partitionId?, offset?}`, phases `register pop state-get window-apply operator gate-eval cycle flush lease-extend`',
    '(error, info) => void',
  ),
  abortSignal: option(z.custom<AbortSignal>((v) => v instanceof AbortSignal).optional(), { description: 'Stops the runner when aborted (like `handle.stop()`)', rule: 'must be an AbortSignal', type: 'AbortSignal' }),
  logger: option(z.custom<RunnerLogger>((v) => typeof (v as RunnerLogger | null)?.warn === 'function').optional(), {
    description: 'Where log lines go (a dead-lettered poison message)',
    rule: 'must have a warn(message) method',
    type: '{ warn(message) }',
    default: '`console`',
  }),
  clock: fn<() => number>("Test seam: the runner's own clock (epoch ms); windows still close on the broker's clock", '() => number', 'must be a function returning epoch ms'),
});

/** `run()`'s options after checks and defaults. */
export interface RunSettings extends RunOptions {
  batchSize: number;
  maxPartitions: number;
  maxWaitMillis: number;
  reset: boolean;
  consumerGroup: string;
  logger: RunnerLogger;
}

/** Validates `run()`'s options (throws VALIDATION_FAILED naming the option) and applies the defaults. */
export function resolveRunOptions(options: RunOptions): RunSettings {
  const o = parseOptions('run()', runOptionsSchema, options);
  return {
    ...options,
    batchSize: o.batchSize ?? 200,
    maxPartitions: o.maxPartitions ?? 4,
    maxWaitMillis: o.maxWaitMillis ?? 1000,
    reset: o.reset ?? false,
    consumerGroup: o.consumerGroup ?? `streams.${o.queryId}`,
    logger: o.logger ?? console,
  };
}
