import { chainError, option, parseWindowPluginOptions, windowOptionsSchema, z, type WindowBounds, type WindowOptions, type WindowPlugin } from '@queen-mq/core';

/** Options of {@link sliding}: window size and hop plus every window's common options. */
export interface SlidingOptions<T = any> extends WindowOptions<T> {
  /** Window length in whole seconds (> 0), an integer multiple of `slide`. */
  size: number;
  /** Hop between window starts in whole seconds (> 0). Starts are aligned to the Unix epoch. */
  slide: number;
}

/** Idle-flush interval when the options omit `idleFlushMs` (ms). */
export const SLIDING_DEFAULT_IDLE_FLUSH_MS = 5000;

/** What `sliding()` itself takes; the common window options go to `.window()`. */
const slidingPluginSchema = z.object({
  size: option(z.number().int().positive(), { description: 'Window length, an integer multiple of `slide`', rule: 'must be a positive integer', type: 'integer (s)' }),
  slide: option(z.number().int().positive(), { description: 'Hop between window starts; starts are aligned to the Unix epoch', rule: 'must be a positive integer', type: 'integer (s)' }),
});

/** {@link SlidingOptions} as a schema: validates `.windowSliding()` and renders the options table. */
export const slidingOptionsSchema = windowOptionsSchema.extend(slidingPluginSchema.shape);

/**
 * Overlapping windows `[k·slide, k·slide + size)` (epoch-aligned): every
 * timestamp lands in exactly `size / slide` of them. State rows are tagged
 * `slide:<size>:<slide>`. Throws (VALIDATION_FAILED) unless both are positive
 * integers and `size` is an integer multiple of `slide` — otherwise an event
 * would belong to a varying number of windows — for an unknown option, and
 * for a common window option (`idleFlushMs`, …): those go to
 * `.window(sliding({ size, slide }), { … })` or to `.windowSliding()`.
 */
export function sliding(options: Pick<SlidingOptions, 'size' | 'slide'>): WindowPlugin {
  const { size, slide } = parseWindowPluginOptions('sliding window', slidingPluginSchema, options);
  if (size % slide !== 0) throw chainError(`sliding window: size (${size}) must be an integer multiple of slide (${slide})`);
  const sizeMs = size * 1000;
  const slideMs = slide * 1000;
  const perEvent = size / slide;
  return Object.freeze({
    kind: 'sliding',
    shape: { size, slide },
    tag: `slide:${size}:${slide}`,
    defaultIdleFlushMs: SLIDING_DEFAULT_IDLE_FLUSH_MS,
    assign(timestampMs: number): WindowBounds[] {
      const lastStart = Math.floor(timestampMs / slideMs) * slideMs;
      const out: WindowBounds[] = [];
      // Oldest first: the window that started (perEvent − 1) hops before the newest.
      for (let k = perEvent - 1; k >= 0; k--) {
        const start = lastStart - k * slideMs;
        out.push({ start, end: start + sizeMs });
      }
      return out;
    },
  });
}
