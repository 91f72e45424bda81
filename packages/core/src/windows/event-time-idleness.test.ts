import { describe, expect, it } from 'vitest';
import type { StateRow } from '../context/wire.js';
import { WATERMARK_KEY } from '../plan/keys.js';
import { watermarkAt, watermarkState, watermarkUpsert } from './event-time-idleness.js';

// The idleness rule as functions of the stored `__wm__` row and a broker time.

const rows = (value: unknown, version = 3): Map<string, StateRow> => new Map([[WATERMARK_KEY, { key: WATERMARK_KEY, value, version } as StateRow]]);
const idle = { idleTimeoutMs: 10_000 };

describe('event-time idleness', () => {
  it('watermark(at) = W + (at − quietSince − idleTimeoutMs) once past the timeout, else W; off without the option or an anchor', () => {
    const wm = { eventTimeMs: 1_000_000, quietSinceMs: 2_000_000 };
    expect(watermarkAt(idle, wm, 2_010_000)).toBe(1_000_000); // exactly the timeout: not idle yet
    expect(watermarkAt(idle, wm, 2_010_001)).toBe(1_000_001);
    expect(watermarkAt(idle, wm, 2_070_000)).toBe(1_060_000);
    expect(watermarkAt(idle, wm, 1_000)).toBe(1_000_000); // an older time never moves it back
    expect(watermarkAt({}, wm, 9e12)).toBe(1_000_000);
    expect(watermarkAt(idle, { eventTimeMs: 5 }, 9e12)).toBe(5); // a row written before idleness was on
    expect(watermarkAt(idle, undefined, 9e12)).toBeUndefined();
  });

  it('the upsert: the anchor with idleness (never moving back), the plain {eventTimeMs} without; nothing when the row already says so', () => {
    expect(watermarkUpsert({}, new Map(), 50, 70)).toEqual([{ type: 'upsert', key: WATERMARK_KEY, value: { eventTimeMs: 50 }, expected_version: 0 }]);
    expect(watermarkUpsert({}, rows({ eventTimeMs: 50 }), 50, 99)).toEqual([]);
    expect(watermarkUpsert(idle, rows({ eventTimeMs: 50, quietSinceMs: 70 }), 50, 70)).toEqual([]);
    expect(watermarkUpsert(idle, rows({ eventTimeMs: 50, quietSinceMs: 70 }), 50, 80)).toEqual([
      { type: 'upsert', key: WATERMARK_KEY, value: { eventTimeMs: 50, quietSinceMs: 80 }, expected_version: 3 },
    ]);
    // A later offset stamped a few ms earlier (createdAt is the push's transaction start) keeps the anchor.
    expect(watermarkUpsert(idle, rows({ eventTimeMs: 50, quietSinceMs: 70 }), 60, 65)).toEqual([
      { type: 'upsert', key: WATERMARK_KEY, value: { eventTimeMs: 60, quietSinceMs: 70 }, expected_version: 3 },
    ]);
    expect(watermarkState(rows({ eventTimeMs: 'x' }))).toBeUndefined();
  });
});
