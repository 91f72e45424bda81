import { chainError, type WindowOptions, type WindowPlugin } from '@queen-mq/core';

/** Options of {@link tumbling}: the window size plus every window's common options. */
export interface TumblingOptions<T = any> extends WindowOptions<T> {
  /** Window length in whole seconds (> 0). Windows are aligned to the Unix epoch. */
  seconds: number;
}

/** Idle-flush interval when the options omit `idleFlushMs` (ms). */
export const TUMBLING_DEFAULT_IDLE_FLUSH_MS = 5000;

/**
 * Fixed, non-overlapping, epoch-aligned buckets of `seconds`:
 * `[floor(t / size) * size, +size)`. State rows are tagged `tumb:<seconds>`.
 * Throws (VALIDATION_FAILED) unless `seconds` is a positive integer number.
 */
export function tumbling(options: Pick<TumblingOptions, 'seconds'>): WindowPlugin {
  const seconds = (options as { seconds?: unknown } | undefined)?.seconds;
  if (typeof seconds !== 'number' || !Number.isInteger(seconds) || seconds <= 0) {
    throw chainError(`tumbling window: seconds must be a positive integer, got ${JSON.stringify(seconds)}`);
  }
  const size = seconds * 1000;
  return Object.freeze({
    kind: 'tumbling',
    shape: { seconds },
    tag: `tumb:${seconds}`,
    defaultIdleFlushMs: TUMBLING_DEFAULT_IDLE_FLUSH_MS,
    assign(timestampMs: number) {
      const start = Math.floor(timestampMs / size) * size;
      return [{ start, end: start + size }];
    },
  });
}
