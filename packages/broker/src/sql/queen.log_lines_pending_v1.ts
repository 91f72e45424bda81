import type { NamedStatement } from '../db/database.js';

// The TypeScript half of queen.log_lines_pending_v1.sql, beside it.

/**
 * The wait room's re-check statement: the pause flag (pops paused elsewhere
 * answer 204 at once) and which lines have a message past their group's
 * cursor, in one round trip. $1, $2, $3: the lines' queues, groups and
 * partitions (null: any), position by position.
 */
export const LINES_PENDING_SQL: NamedStatement = {
  name: 'queen_lines_pending',
  text: `select coalesce((select (value)::text::boolean from queen.flags where name = 'pop_paused'), false) as paused,
                array(select queen.log_lines_pending_v1($1::text[], $2::text[], $3::text[])) as pending`,
};

/** The row of LINES_PENDING_SQL: `pending` holds the 1-based positions of the lines with a message to pop. */
export interface LinesPendingRow {
  paused: boolean;
  pending: number[];
}
