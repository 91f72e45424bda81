import type { ResolvedWindowOptions } from '../plan/window-options.js';
import type { StateOp, StateRow } from '../context/wire.js';
import { WATERMARK_KEY } from '../plan/keys.js';

// Event-time idleness (opt-in, `idleTimeoutMs`): a partition that has had no
// message for idleTimeoutMs of broker time stops holding its watermark back;
// from then on the watermark moves with the broker's clock. Stated as one
// function of the stored watermark row and a broker time, so a cycle (at its
// batch's createdAt) and an idle flush (at the broker's clock) agree.

/** The event-time watermark row `__wm__` (PROTOCOL §7.6 value, plus the idleness anchor). */
interface WatermarkState {
  eventTimeMs: number;
  /**
   * With idleTimeoutMs: the broker time from which the partition counts as
   * quiet — the newest createdAt folded, moved to `now − idleTimeoutMs` when
   * an idle flush persists an advance (so the advance is never counted twice).
   */
  quietSinceMs?: number;
}

export function watermarkState(rows: ReadonlyMap<string, StateRow>): WatermarkState | undefined {
  const v = rows.get(WATERMARK_KEY)?.value;
  if (typeof v?.eventTimeMs !== 'number') return undefined;
  return typeof v.quietSinceMs === 'number' ? { eventTimeMs: v.eventTimeMs, quietSinceMs: v.quietSinceMs } : { eventTimeMs: v.eventTimeMs };
}

/**
 * The watermark at broker time `atMs`: the stored one, or — idleness on and
 * the partition quiet for longer than idleTimeoutMs — the stored one plus the
 * broker time elapsed beyond the timeout:
 * `eventTimeMs + (atMs − quietSinceMs − idleTimeoutMs)`. Never below the stored one.
 */
export function watermarkAt(options: Pick<ResolvedWindowOptions, 'idleTimeoutMs'>, wm: WatermarkState | undefined, atMs: number): number | undefined {
  if (!wm) return undefined;
  if (options.idleTimeoutMs === undefined || wm.quietSinceMs === undefined || !Number.isFinite(atMs)) return wm.eventTimeMs;
  const idleFor = atMs - wm.quietSinceMs - options.idleTimeoutMs;
  return idleFor > 0 ? wm.eventTimeMs + idleFor : wm.eventTimeMs;
}

/**
 * The upsert of `__wm__` for a watermark `clock` (and, with idleness, the
 * quiet anchor `quietSinceMs`), or nothing when the stored row already says so.
 */
export function watermarkUpsert(
  options: Pick<ResolvedWindowOptions, 'idleTimeoutMs'>,
  stored: ReadonlyMap<string, StateRow>,
  clock: number,
  quietSinceMs: number | undefined,
): StateOp[] {
  const row = stored.get(WATERMARK_KEY);
  const old = watermarkState(stored);
  const idle = options.idleTimeoutMs !== undefined && quietSinceMs !== undefined && Number.isFinite(quietSinceMs);
  // The anchor never moves back (createdAt of a later offset may be a few ms older).
  const anchor = idle ? Math.max(quietSinceMs, old?.quietSinceMs ?? -Infinity) : undefined;
  if (old && old.eventTimeMs === clock && (!idle || old.quietSinceMs === anchor)) return [];
  const value = idle ? { eventTimeMs: clock, quietSinceMs: anchor } : { eventTimeMs: clock };
  return [{ type: 'upsert', key: WATERMARK_KEY, value, expected_version: row ? row.version : 0 }];
}
