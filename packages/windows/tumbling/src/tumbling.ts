import { option, parseWindowPluginOptions, windowOptionsSchema, z, type WindowOptions, type WindowPlugin } from '@queen-mq/core';

/** Options of {@link tumbling}: the window size plus every window's common options. */
export interface TumblingOptions<T = any> extends WindowOptions<T> {
  /** Window length in whole seconds (> 0). Windows are aligned to the Unix epoch. */
  seconds: number;
}

/** Idle-flush interval when the options omit `idleFlushMs` (ms). */
export const TUMBLING_DEFAULT_IDLE_FLUSH_MS = 5000;

/** What `tumbling()` itself takes; the common window options go to `.window()`. */
const tumblingPluginSchema = z.object({
  seconds: option(z.number().int().positive(), {
    description: 'Window length; windows are aligned to the Unix epoch',
    rule: 'must be a positive integer',
    type: 'integer (s)',
  }),
});

/** {@link TumblingOptions} as a schema: validates `.windowTumbling()` and renders the options table. */
export const tumblingOptionsSchema = windowOptionsSchema.extend(tumblingPluginSchema.shape);

/**
 * Fixed, non-overlapping, epoch-aligned buckets of `seconds`:
 * `[floor(t / size) * size, +size)`. State rows are tagged `tumb:<seconds>`.
 * Throws (VALIDATION_FAILED, naming the option) unless `seconds` is a
 * positive integer, for an unknown option, and for a common window option
 * (`idleFlushMs`, …): those go to `.window(tumbling({ seconds }), { idleFlushMs })`
 * or, together, to `.windowTumbling({ seconds, idleFlushMs })`.
 */
export function tumbling(options: Pick<TumblingOptions, 'seconds'>): WindowPlugin {
  const { seconds } = parseWindowPluginOptions('tumbling window', tumblingPluginSchema, options);
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
