import type { NamedStatement } from '../db/database.js';

// The TypeScript half of queen.log_push_many_v1.sql, beside it: its items
// and rows are the allocator's (queen.log_append_v1.ts).

/** The SQL of a whole push over several partitions: one statement, one row per item in input order (AllocatorResult). $1: the AllocatorItems as jsonb, $2: the producer. */
export const PUSH_MANY_SQL: NamedStatement = { name: 'queen_push_many', text: 'select * from queen.log_push_many_v1($1::jsonb, $2)' };
