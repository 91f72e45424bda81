// The TypeScript half of queen.log_pop_dead_letter_v1.sql, beside it.

/**
 * Dead-letters what a pop claimed but cannot deliver, and moves the
 * partitions on. $1: the group, $2: the pop's lease, $3: whether the pop
 * acked as it claimed (autoAck), $4: the reason recorded, $5: the
 * PopDeadLetterItems as jsonb. Answers how many messages were dead-lettered.
 */
export const POP_DEAD_LETTER_SQL = 'select queen.log_pop_dead_letter_v1($1, $2, $3, $4, $5::jsonb) as n';

/** One partition of POP_DEAD_LETTER_SQL: the offsets to dead-letter, and where the pop stopped short. */
export interface PopDeadLetterItem {
  partitionId: string;
  dead?: string[];
  from?: string;
  last?: string;
}

/** The row of POP_DEAD_LETTER_SQL. */
export interface PopDeadLetterRow {
  n: number;
}
