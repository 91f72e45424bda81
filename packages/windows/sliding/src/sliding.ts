import { chainError, option, parseWindowPluginOptions, windowOptionsSchema, z, type WindowBounds, type WindowOptions, type WindowPlugin } from '@queen-mq/core';

/** Options of {@link sliding}: window size and hop plus every window's common options. */
export interface SlidingOptions<T = any> extends WindowOptions<T> {
  /** Window length in seconds (> 0; fractions to the millisecond allowed), at least `slide`. */
  size: number;
  /** Hop between window starts in seconds (> 0, at most `size`; fractions to the millisecond allowed). Starts are multiples of `slide` since the Unix epoch. */
  slide: number;
}

/** Idle-flush interval when the options omit `idleFlushMs` (ms). */
export const SLIDING_DEFAULT_IDLE_FLUSH_MS = 5000;

/** Seconds given to the millisecond: a window bound is an integer number of epoch ms. */
const seconds = z
  .number()
  .positive()
  .refine((s) => Math.abs(s * 1000 - Math.round(s * 1000)) < 1e-6, 'must be a whole number of milliseconds');

/** What `sliding()` itself takes; the common window options go to `.window()`. */
const slidingPluginSchema = z.object({
  size: option(seconds, { description: 'Window length, at least `slide` (fractions allowed)', rule: 'must be a positive number of seconds, to the millisecond', type: 'number (s)' }),
  slide: option(seconds, {
    description: 'Hop between window starts, at most `size` (fractions allowed); starts are the multiples of `slide` since the Unix epoch',
    rule: 'must be a positive number of seconds, to the millisecond',
    type: 'number (s)',
  }),
});

/** {@link SlidingOptions} as a schema: validates `.windowSliding()` and renders the options table. */
export const slidingOptionsSchema = windowOptionsSchema.extend(slidingPluginSchema.shape);

/**
 * Overlapping windows `[k·slide, k·slide + size)` for every integer k (starts
 * are the multiples of `slide` counted from the Unix epoch): every timestamp
 * lands in each of them that contains it, `ceil(size / slide)` or one fewer
 * when `size` is not a multiple of `slide`. State rows are tagged
 * `slide:<size>:<slide>`. Throws (VALIDATION_FAILED) unless both are positive
 * numbers of seconds to the millisecond and `slide` ≤ `size` (a larger slide
 * would leave gaps no window covers), for an unknown option, and for a
 * common window option (`idleFlushMs`, …): those go to
 * `.window(sliding({ size, slide }), { … })` or to `.windowSliding()`.
 */
export function sliding(options: Pick<SlidingOptions, 'size' | 'slide'>): WindowPlugin {
  const { size, slide } = parseWindowPluginOptions('sliding window', slidingPluginSchema, options);
  if (slide > size) throw chainError(`sliding window: slide (${slide}) must not exceed size (${size})`);
  const sizeMs = Math.round(size * 1000);
  const slideMs = Math.round(slide * 1000);
  return Object.freeze({
    kind: 'sliding',
    shape: { size, slide },
    tag: `slide:${size}:${slide}`,
    defaultIdleFlushMs: SLIDING_DEFAULT_IDLE_FLUSH_MS,
    assign(timestampMs: number): WindowBounds[] {
      // The newest window containing the timestamp starts at the last multiple of slide at or before it;
      // older ones start a hop earlier each, as long as they have not ended by it.
      const lastStart = Math.floor(timestampMs / slideMs) * slideMs;
      let first = lastStart;
      while (first - slideMs + sizeMs > timestampMs) first -= slideMs;
      const out: WindowBounds[] = [];
      for (let start = first; start <= lastStart; start += slideMs) out.push({ start, end: start + sizeMs });
      return out;
    },
  });
}
