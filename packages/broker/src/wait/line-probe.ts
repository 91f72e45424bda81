import type { Database, NamedStatement } from '../db/database.js';
import type { LineProbe, LineRef } from './wait-room.js';

/** Lines one statement asks about at most: a burst of parked pops is asked in several statements, not one long one. */
const LINES_PER_STATEMENT = 2000;

/**
 * The wait room's re-check statement: the pause flag (pops paused elsewhere
 * answer 204 at once) and which lines have a message past their group's
 * cursor (queen.log_lines_pending_v1), in one round trip.
 */
const PROBE_SQL: NamedStatement = {
  name: 'queen_lines_pending',
  text: `select coalesce((select (value)::text::boolean from queen.flags where name = 'pop_paused'), false) as paused,
                array(select queen.log_lines_pending_v1($1::text[], $2::text[], $3::text[])) as pending`,
};

/** The wait room's {@link LineProbe} on this database. */
export function lineProbe(db: Database): LineProbe {
  return async (lines: readonly LineRef[]) => {
    const pending: number[] = [];
    let paused = false;
    for (let from = 0; from < lines.length; from += LINES_PER_STATEMENT) {
      const slice = lines.slice(from, from + LINES_PER_STATEMENT);
      const { rows } = await db.query<{ paused: boolean; pending: number[] }>(PROBE_SQL, [
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
