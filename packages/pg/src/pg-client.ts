/**
 * What enqueue and ack need of a `pg` connection: its `query`. A `Client` or
 * a `PoolClient` inside your `BEGIN ... COMMIT` is what makes the call part
 * of your transaction; a `Pool` works too, but each call then commits on its
 * own.
 */
export interface PgClient {
  query(text: string, values?: unknown[]): Promise<{ rows: any[] }>;
}
