import { describe, expect, it } from 'vitest';
import { tumbling } from './tumbling.js';

describe('tumbling window plugin', () => {
  it('S3 seconds must be a positive integer number', () => {
    for (const seconds of [0, -1, '60', 2.5, null, undefined]) {
      expect(() => tumbling({ seconds: seconds as any }), String(seconds)).toThrow(/seconds must be a positive integer/);
    }
    expect(tumbling({ seconds: 60 })).toMatchObject({ kind: 'tumbling', tag: 'tumb:60', shape: { seconds: 60 }, defaultIdleFlushMs: 5000 });
  });

  it('S10 edges: [start, end) with the end exclusive', () => {
    const w = tumbling({ seconds: 60 });
    const t = (iso: string) => w.assign(Date.parse(iso));
    expect(t('2026-01-05T10:00:00.000Z')).toEqual([{ start: Date.parse('2026-01-05T10:00:00.000Z'), end: Date.parse('2026-01-05T10:01:00.000Z') }]);
    expect(t('2026-01-05T10:00:59.999Z')[0]!.start).toBe(Date.parse('2026-01-05T10:00:00.000Z'));
    expect(t('2026-01-05T10:01:00.000Z')[0]!.start).toBe(Date.parse('2026-01-05T10:01:00.000Z'));
  });

  it('S11 epoch alignment: seconds 7 puts 13000, 13999 in [7000,14000) and 14000 in the next', () => {
    const w = tumbling({ seconds: 7 });
    expect(w.assign(13000)).toEqual([{ start: 7000, end: 14000 }]);
    expect(w.assign(13999)).toEqual([{ start: 7000, end: 14000 }]);
    expect(w.assign(14000)).toEqual([{ start: 14000, end: 21000 }]);
    expect(w.assign(-1)).toEqual([{ start: -7000, end: 0 }]);
  });
});
