// The TypeScript half of queen.log_delete_group_v1.sql, beside it.

/** Deletes group $1's cursors on every queue ($2: its metadata too). Answers the partitions whose cursor went. */
export const DELETE_GROUP_SQL = 'select queen.log_delete_group_v1($1, null, $2) as n';

/** Deletes group $1's cursors on queue $2 ($3: its metadata too). No row when the queue does not exist. */
export const DELETE_GROUP_OF_QUEUE_SQL = 'select queen.log_delete_group_v1($1, q.id, $3) as n from queen.queues q where q.name = $2';

/** The row of DELETE_GROUP_SQL and DELETE_GROUP_OF_QUEUE_SQL. */
export interface DeleteGroupRow {
  n: number;
}
