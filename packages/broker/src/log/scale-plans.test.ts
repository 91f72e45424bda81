import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { startTestBroker, type TestBroker } from '@queen-mq/testing';
import { ACK_SQL, ackParams } from '../sql/queen.log_ack_v2.js';
import { PUSH_RUN_SQL } from '../sql/queen.log_append_v1.js';
import { POP_SQL } from '../sql/queen.log_pop_v4.js';
import { CREATED_PER_CHECK, StatisticsKeeper } from '../db/statistics.js';

// Issue 31: plans a connection made while the tables were tiny (autovacuum
// analyzes a fresh database early) must not scan them whole once they grew.
// One connection plans the hot statements on a database analyzed at a
// handful of rows, then the database grows by GROW partitions with a message
// each (no analyze), and the same connection's statements, nested plpgsql
// ones included (auto_explain), must still find their rows by key.

const GROW = 5_000;
const TABLES = /(Seq Scan on (partitions|log_segments|queues|cursors|messages)\b)|(Rows Removed by (Join )?Filter: \d{4,})/;
const HOT_TABLES = ['queues', 'partitions', 'log_segments', 'cursors', 'messages'];

let b: TestBroker;
let c: pg.PoolClient;
beforeAll(async () => {
  b = await startTestBroker();
  c = await b.sql.connect();
  for (const t of HOT_TABLES) await b.sql.query(`alter table queen.${t} set (autovacuum_enabled = false)`);
});
afterAll(async () => {
  c?.release(true);
  await b?.stop();
});

describe('hot statements stay on their indexes after the database grew', () => {
  it('push, pop of one partition and both acks planned at a few rows read no table whole at 5,000 more partitions', async () => {
    const queue = `hot-${randomUUID()}`;
    const pid = (await c.query(`select partition_id from queen.ensure_partitions_v1($1::jsonb)`, [JSON.stringify([{ queue, partition: 'p' }])])).rows[0].partition_id as string;
    await c.query(`analyze ${HOT_TABLES.map((t) => `queen.${t}`).join(', ')}`);
    const pop = async () => {
      const lease = randomUUID();
      const rows = (await c.query({ ...POP_SQL, values: [queue, 'p', '__QUEUE_MODE__', 1, 1, false, lease, 'all', null, 8 << 20, false, null, null] })).rows;
      expect(rows[0].msg_offset).not.toBeNull();
      return { lease, offset: rows[0].msg_offset as string, txid: rows[0].transaction_id as string };
    };
    const cycle = async () => {
      await c.query({ ...PUSH_RUN_SQL, values: [pid, JSON.stringify([{ payload: 1 }, { payload: 2 }]), null] });
      const one = await pop();
      const run = (await c.query({ ...ACK_SQL.ask, values: ackParams('__QUEUE_MODE__', { run: { partitionId: pid, leaseId: one.lease, offsets: [one.offset], txids: [one.txid] } }) })).rows;
      expect(run[0].answer).toBeNull(); // the run was applied
      const two = await pop();
      const acks = [{ transactionId: two.txid, partitionId: pid, leaseId: two.lease, offset: two.offset }];
      const acked = (await c.query({ ...ACK_SQL.ask, values: ackParams('__QUEUE_MODE__', { items: acks.map((a, idx) => ({ idx, ...a })), partitionIds: [pid] }) })).rows;
      expect(acked[0].answer.offsets ?? acked[0].answer).toBeTruthy();
    };
    // Planned (plpgsql caches at first run, top-level statements go generic after five runs).
    for (let i = 0; i < 7; i++) await cycle();

    // The database grows behind the connection's back.
    const grower = await b.sql.connect();
    try {
      for (let done = 0; done < GROW; done += 2_500) {
        // Half in one queue, half over 500: the skew of a queue of many partitions.
        const targets = Array.from({ length: 2_500 }, (_, i) => ({ queue: done === 0 ? 'grown-big' : `grown-${(done + i) % 500}`, partition: `p${done + i}` }));
        const ids = (await grower.query(`select partition_id from queen.ensure_partitions_v1($1::jsonb)`, [JSON.stringify(targets)])).rows.map((r) => r.partition_id);
        await grower.query(`select count(*) from queen.log_push_many_v1($1::jsonb, null)`, [JSON.stringify(ids.map((id) => ({ partition_id: id, payload: 1 })))]);
      }
      // Cursors grow too: every grown partition consumed once by a group.
      await grower.query(`insert into queen.cursors (partition_id, consumer_group, cursor_offset) select id, '__QUEUE_MODE__', 1 from queen.partitions where queue_name like 'grown-%'`);
    } finally {
      grower.release();
    }

    const plans: string[] = [];
    const onNotice = (n: { message?: string }) => plans.push(String(n.message));
    c.on('notice', onNotice);
    await c.query(`load 'auto_explain'`);
    await c.query(`set auto_explain.log_min_duration = 0; set auto_explain.log_nested_statements = on; set auto_explain.log_analyze = on; set auto_explain.log_timing = off; set auto_explain.log_level = notice`);
    try {
      await cycle();
    } finally {
      await c.query('set auto_explain.log_min_duration = -1');
      c.off('notice', onNotice);
    }
    expect(plans.length).toBeGreaterThan(10);
    const whole = plans.filter((p) => TABLES.test(p)).map((p) => p.slice(0, 1500));
    expect(whole).toEqual([]);
  }, 120_000);

  it('a push creating partitions in a queue of many finds each by queue and name, whatever the average queue holds', async () => {
    // Statistics taken now: 2,500 partitions in grown-big, about 10 in each other queue.
    await b.sql.query(`analyze ${HOT_TABLES.map((t) => `queen.${t}`).join(', ')}`);
    const fresh = await b.sql.connect();
    const plans: string[] = [];
    fresh.on('notice', (n: { message?: string }) => plans.push(String(n.message)));
    try {
      await fresh.query(`load 'auto_explain'`);
      await fresh.query(`set auto_explain.log_min_duration = 0; set auto_explain.log_nested_statements = on; set auto_explain.log_analyze = on; set auto_explain.log_timing = off; set auto_explain.log_level = notice`);
      const targets = Array.from({ length: 200 }, (_, i) => ({ queue: 'grown-big', partition: `new-${i}` }));
      const { rows } = await fresh.query(`select partition_name from queen.ensure_partitions_v1($1::jsonb)`, [JSON.stringify([...targets, { queue: 'grown-big', partition: 'p0' }])]);
      expect(rows).toHaveLength(201);
    } finally {
      fresh.release(true);
    }
    expect(plans.filter((p) => TABLES.test(p)).map((p) => p.replace(/\$1 = '.*/s, '').slice(0, 1500))).toEqual([]);
  });

  it('the hot functions carry enable_seqscan = off (a CREATE OR REPLACE that drops it fails here)', async () => {
    const { rows } = await b.sql.query<{ fn: string; config: string[] | null }>(
      `select n.nspname || '.' || p.proname as fn, p.proconfig as config
         from pg_proc p join pg_namespace n on n.oid = p.pronamespace
        where n.nspname || '.' || p.proname = any($1::text[])`,
      [[
        'queen.ensure_partitions_v1', 'queen.log_append_v1', 'queen.log_append_advance_v1', 'queen.log_push_many_v1',
        'queen.log_pop_v4', 'queen.pop_target_v1', 'queen.log_claimable_any_v1', 'queen.log_claimable_of_v1',
        'queen.log_ack_v2', 'queen.log_ack_pop_run_v1', 'queen.log_ack_run_holds_v1', 'queen.log_ack_completed_v1', 'queen.log_ack_lock_v1', 'queen.log_ack_move_v1',
        'queen.log_streams_cycle_v1', 'queen.message_traceparents_v1', 'queen.listing_totals_refresh_v1',
      ]],
    );
    expect(rows).toHaveLength(17);
    for (const r of rows) expect(r.config, r.fn).toContain('enable_seqscan=off');
  });

  it('the broker analyzes the partition tables once clients created CREATED_PER_CHECK partitions and they more than doubled', async () => {
    // Autovacuum is off on these tables here: only the broker can refresh them.
    const reltuples = async () => Number((await b.sql.query(`select reltuples from pg_class where oid = 'queen.partitions'::regclass`)).rows[0].reltuples);
    await b.sql.query('analyze queen.partitions');
    const before = await reltuples();
    const live = Number((await b.sql.query('select count(*) from queen.partitions')).rows[0].count);
    expect(before).toBe(live);
    // More than double, over HTTP, in pushes of 500 new partitions each.
    const queue = `grow-${randomUUID()}`;
    const created = Math.max(CREATED_PER_CHECK, live + 3_000);
    for (let i = 0; i < created; i += 500) {
      const items = Array.from({ length: Math.min(500, created - i) }, (_, j) => ({ queue, partition: `p${i + j}`, payload: 1 }));
      expect((await b.http('POST', '/api/v1/push', { items })).status).toBe(201);
    }
    // Refreshed at least once, and now within a factor of two of the live rows.
    const deadline = Date.now() + 20_000;
    while ((await reltuples()) === before && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    const after = await reltuples();
    expect(after).toBeGreaterThan(before);
    expect(2 * after + 2_000).toBeGreaterThanOrEqual(live + created);
    // Nothing left to do for the partitions until they double again. (The
    // tallies are filled by the listing totals' refresh after the pushes, so
    // they may still grow past the broker's last check: that is for the next
    // check to see.)
    expect(await new StatisticsKeeper(b.ctx.db, b.ctx.log).check()).not.toContain('partitions');
  }, 120_000);
});
