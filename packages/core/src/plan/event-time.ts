import type { EventTimeValue } from './plugins.js';

/**
 * Epoch ms of what an `eventTime` extractor returned: a Date, an epoch-ms
 * number or an ISO string. Anything else (null, NaN, "not-a-date", a date
 * outside the JavaScript range) → undefined: that message cannot be placed
 * and is handled as poison (window-placement.ts; onError phase "window-apply").
 */
export function toEpochMs(value: EventTimeValue | null | undefined | unknown): number | undefined {
  let ms: number;
  if (value instanceof Date) ms = value.getTime();
  else if (typeof value === 'number') ms = value;
  else if (typeof value === 'string' && value.trim() !== '') ms = Date.parse(value);
  else return undefined;
  if (!Number.isFinite(ms) || Math.abs(ms) > 8.64e15) return undefined;
  return Math.floor(ms);
}
