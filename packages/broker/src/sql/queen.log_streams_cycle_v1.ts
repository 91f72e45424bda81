import type { CycleResult } from '@queen-mq/protocol';
import type { NamedStatement } from '../db/database.js';

// The TypeScript half of queen.log_streams_cycle_v1.sql, beside it: the
// cycle statement and the row it answers. A change to the function's
// arguments or result is a change to both files.

/** The cycle statement, parsed once per connection. */
export const CYCLE_SQL: NamedStatement = { name: 'queen_cycle', text: 'select queen.log_streams_cycle_v1($1::jsonb) as r' };
/** A cycle of a named version (queen_streams.cycle_at_version_v1.sql): the same, refused QUERY_VERSION_CHANGED when another version is registered. */
export const CYCLE_AT_VERSION_SQL: NamedStatement = { name: 'queen_cycle_at_version', text: 'select queen_streams.cycle_at_version_v1($1::jsonb, $2) as r' };

/** What queen_streams.push_sink_runs_v1 answers: per item, in order. */
export interface SinkAnswer {
  status: ('queued' | 'duplicate')[];
  message_id: string[];
  offset: string[];
}

/** The row of CYCLE_SQL: one result per element, by the element's idx. */
export interface CycleRow {
  r: { idx: number; result: CycleResult }[];
}
