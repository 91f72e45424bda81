import type { WindowPlugin } from '../src/plugins.js';

/**
 * A minimal tumbling window of one minute, written against core's interface
 * only (core never imports a concrete window), for core's own tests.
 */
export function minuteWindow(defaultIdleFlushMs: number): WindowPlugin {
  return {
    kind: 'test-tumbling',
    shape: { seconds: 60 },
    tag: 'tumb:60',
    defaultIdleFlushMs,
    assign: (t) => {
      const start = Math.floor(t / 60000) * 60000;
      return [{ start, end: start + 60000 }];
    },
  };
}
