import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startTestBroker, type TestBroker } from './harness.js';

// PostgreSQL ending an idle session of the harness's own pool (what a
// cluster stopped right after stop() does) must not end the test process:
// pg-pool emits 'error' on the pool for it, fatal with no listener.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

describe('test broker harness', () => {
  it("an idle session of the harness's pool ended by PostgreSQL does not crash the process", async () => {
    const { rows } = await b.sql.query<{ pid: number }>('select pg_backend_pid() as pid');
    const admin = new pg.Client({ connectionString: b.databaseUrl });
    await admin.connect();
    try {
      await admin.query('select pg_terminate_backend($1)', [rows[0]!.pid]);
      // The pool drops the ended client; the next query opens a new session.
      await eventually(async () => b.sql.totalCount === 0, 5000, 20);
      expect((await b.sql.query('select 1 as one')).rows[0].one).toBe(1);
    } finally {
      await admin.end();
    }
  });
});
