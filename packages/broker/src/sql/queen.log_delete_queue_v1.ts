// The TypeScript half of queen.log_delete_queue_v1.sql, beside it.

/** Deletes queue $1 and everything of it, in one transaction. */
export const DELETE_QUEUE_SQL = 'select queen.log_delete_queue_v1($1) as existed';

/** The row of DELETE_QUEUE_SQL: whether the queue existed. */
export interface DeleteQueueRow {
  existed: boolean;
}
