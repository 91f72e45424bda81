import { MERGING_END_RULE, chainError, option, parseWindowPluginOptions, windowOptionsSchema, z, type MergedWindow, type MergingWindowPlugin, type WindowBounds, type WindowOptions } from '@queen-mq/core';

/** Options of {@link session}: the inactivity gap plus every window's common options. */
export interface SessionOptions<T = any> extends WindowOptions<T> {
  /** Seconds (> 0, fractions allowed) of silence that end a session of one key. */
  gap: number;
}

/** Idle-flush interval when the options omit `idleFlushMs` (ms). */
export const SESSION_DEFAULT_IDLE_FLUSH_MS = 1000;

/** What `session()` itself takes; the common window options go to `.window()`. */
const sessionPluginSchema = z.object({
  gap: option(z.number().positive(), { description: 'Silence that ends a session of one key (fractions allowed)', rule: 'must be a positive number of seconds', type: 'number (s)' }),
});

/** {@link SessionOptions} as a schema: validates `.windowSession()` and renders the options table. */
export const sessionOptionsSchema = windowOptionsSchema.extend(sessionPluginSchema.shape);

/**
 * A merging window: each event at `t` opens the window `[t, t + gap]`, and
 * windows of one key that touch or overlap merge (the end is INCLUSIVE: an
 * event exactly `gap` after the last one still extends the session). A
 * merged session spans `[first event, last event + gap]`. Core keeps one
 * state row per key, `sess:<gap>␟open␟<userKey>`, merges accumulators and
 * closes the session once the clock is past `windowEnd + gracePeriod`.
 * Throws (VALIDATION_FAILED) unless `gap` is a positive finite number, for
 * an unknown option, and for a common window option (`idleFlushMs`, …):
 * those go to `.window(session({ gap }), { … })` or to `.windowSession()`.
 */
export function session(options: Pick<SessionOptions, 'gap'>): MergingWindowPlugin {
  const { gap } = parseWindowPluginOptions('session window', sessionPluginSchema, options);
  const gapMs = Math.round(gap * 1000);
  if (gapMs <= 0) throw chainError(`session window: gap must be at least 1 ms, got ${gap}`);
  return Object.freeze({
    kind: 'session',
    shape: { gap },
    tag: `sess:${gap}`,
    defaultIdleFlushMs: SESSION_DEFAULT_IDLE_FLUSH_MS,
    assign(timestampMs: number): WindowBounds[] {
      return [{ start: timestampMs, end: timestampMs + gapMs }];
    },
    merging: MERGING_END_RULE,
    merge(windows: readonly WindowBounds[]): MergedWindow[] {
      const order = windows.map((_, i) => i).sort((a, b) => windows[a]!.start - windows[b]!.start || windows[a]!.end - windows[b]!.end);
      const out: { start: number; end: number; merged: number[] }[] = [];
      for (const i of order) {
        const w = windows[i]!;
        const last = out[out.length - 1];
        // Inclusive ends: [0, 2000] and [2000, 4000] are one session.
        if (last && w.start <= last.end) {
          last.end = Math.max(last.end, w.end);
          last.merged.push(i);
        } else out.push({ start: w.start, end: w.end, merged: [i] });
      }
      return out;
    },
  });
}
