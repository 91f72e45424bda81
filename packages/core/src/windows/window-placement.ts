import type { WindowBounds, WindowPlugin } from '../plan/plugins.js';
import { toEpochMs } from '../plan/event-time.js';

// Placing one value in its windows: its timestamp (the `eventTime` extractor,
// or the broker's createdAt), then the plugin's `assign`. A value that cannot
// be placed used to be skipped and acked with its batch: in no window, in no
// dead-letter queue, the cursor past it. It is poison now, like a message an
// operator throws on (poison.ts): the messages before it commit, it is
// charged a failed delivery per attempt and, past the source queue's
// retryLimit, dead-lettered for the query's group with the error text, and
// the messages after it come back with the next pop.

/**
 * A message the window stage cannot place: its `eventTime` threw or returned
 * no usable time, or the window plugin's `assign` threw or answered something
 * other than an array. `offset` names the source message (poison, see
 * poison.ts); the runner reports it with onError phase `window-apply`.
 */
export class WindowPlacementError extends Error {
  constructor(message: string, readonly offset: string, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'WindowPlacementError';
  }
}

const reason = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** What a user function answered, short enough for an error text. */
function shown(value: unknown): string {
  if (value === undefined) return 'undefined';
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > 100 ? `${text.slice(0, 100)}…` : text;
}

/** Epoch ms of one value's event time; throws WindowPlacementError when there is none. */
export function eventTimeOf(eventTime: (value: any) => unknown, value: unknown, offset: string): number {
  let raw: unknown;
  try {
    raw = eventTime(value);
  } catch (err) {
    throw new WindowPlacementError(`eventTime threw on the message at offset ${offset}: ${reason(err)}`, offset, err);
  }
  const ms = toEpochMs(raw);
  if (ms === undefined) {
    throw new WindowPlacementError(`eventTime returned ${shown(raw)} for the message at offset ${offset}; expected a Date, epoch ms or an ISO string`, offset);
  }
  return ms;
}

/** The windows a timestamp falls in; throws WindowPlacementError when the plugin cannot answer. */
export function assignWindows(plugin: WindowPlugin, ts: number, offset: string): WindowBounds[] {
  let windows: unknown;
  try {
    windows = plugin.assign(ts);
  } catch (err) {
    throw new WindowPlacementError(`window "${plugin.kind}" assign threw on the message at offset ${offset}: ${reason(err)}`, offset, err);
  }
  if (!Array.isArray(windows)) {
    throw new WindowPlacementError(`window "${plugin.kind}" assign returned ${shown(windows)} for the message at offset ${offset}; expected an array of windows`, offset);
  }
  return windows as WindowBounds[];
}
