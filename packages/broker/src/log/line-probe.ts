import type { Database } from '../db/database.js';
import { LINES_PENDING_SQL, type LinesPendingRow } from '../sql/queen.log_lines_pending_v1.js';
import type { LineProbe, LineRef } from './wait-room.js';

/** Lines one statement asks about at most: a burst of parked pops is asked in several statements, not one long one. */
const LINES_PER_STATEMENT = 2000;

/** The wait room's {@link LineProbe} on this database. */
export function lineProbe(db: Database): LineProbe {
  return async (lines: readonly LineRef[]) => {
    const pending: number[] = [];
    let paused = false;
    for (let from = 0; from < lines.length; from += LINES_PER_STATEMENT) {
      const slice = lines.slice(from, from + LINES_PER_STATEMENT);
      const { rows } = await db.query<LinesPendingRow>(LINES_PENDING_SQL, [
        slice.map((l) => l.queue),
        slice.map((l) => l.group),
        slice.map((l) => l.partition),
      ]);
      paused ||= rows[0]!.paused;
      // 1-based in SQL.
      for (const i of rows[0]!.pending) pending.push(from + i - 1);
    }
    return { pending, paused };
  };
}
