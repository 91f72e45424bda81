import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { streamRoutes } from '@queen-mq/protocol';
import { sleep, startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// Register, list, drop (PROTOCOL §7.1, §7.2) over HTTP against a real PostgreSQL.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

async function register(body: Record<string, unknown>) {
  return b.http('POST', '/streams/v1/queries', body);
}

async function list() {
  const res = await b.http('GET', '/streams/v1/queries');
  expect(res.status).toBe(200);
  return res.body.queries as any[];
}

async function stateRows(queryId: string, partitionId: string) {
  const res = await b.http('POST', '/streams/v1/state/get', { query_id: queryId, partition_id: partitionId });
  return res;
}

/** Writes rows through an ack-null cycle, the only write path of state. */
async function writeState(queryId: string, partitionId: string, keys: string[]) {
  const res = await b.http('POST', '/streams/v1/cycle', {
    query_id: queryId,
    partition_id: partitionId,
    ack: null,
    state_ops: keys.map((key) => ({ type: 'upsert', key, value: { key } })),
  });
  expect(res.status).toBe(200);
  expect(res.body.success).toBe(true);
  return res.body;
}

async function groupCursor(group: string, queue: string) {
  const res = await b.http('GET', `/api/v1/consumer-groups/${encodeURIComponent(group)}?queue=${encodeURIComponent(queue)}`);
  expect(res.status).toBe(200);
  return res.body.partitions[0].cursor as string;
}

/** A source queue with two messages, the first acked by a cycle of the query: cursor(streams.<name>) = 1. */
async function sourceWithCursor(name: string, queryId: string) {
  const src = uniqueName('src');
  const group = `streams.${name}`;
  const push = await b.http('POST', '/api/v1/push', { items: [{ queue: src, payload: 1 }, { queue: src, payload: 2 }] });
  const pid = push.body[0].partition_id as string;
  const pop = await b.http('GET', `/api/v1/pop/queue/${src}?batch=1&consumerGroup=${group}`);
  expect(pop.status).toBe(200);
  const m = pop.body.messages[0];
  const cyc = await b.http('POST', '/streams/v1/cycle', {
    query_id: queryId,
    partition_id: pid,
    consumer_group: group,
    state_ops: [{ type: 'upsert', key: 'k0', value: 0 }],
    ack: { transactionId: m.transactionId, leaseId: m.leaseId },
  });
  expect(cyc.body).toMatchObject({ success: true, ack_result: { offset: '1' } });
  expect(await groupCursor(group, src)).toBe('1');
  return { src, group, pid };
}

describe('register', () => {
  it('S6 register is fresh once, then idempotent, and the list shows it', async () => {
    const name = uniqueName('s6');
    const src = uniqueName('src');
    const body = { name, source_queue: src, sink_queue: `${src}.out`, config_hash: 'a'.repeat(64) };
    const first = await register(body);
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ success: true, name, config_hash: body.config_hash, fresh: true, reset: false });
    expect(first.body.query_id).toMatch(UUID);

    const again = await register(body);
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ success: true, query_id: first.body.query_id, fresh: false, reset: false });

    await writeState(first.body.query_id, '00000000-0000-4000-8000-000000000001', ['x', 'y']);
    const row = (await list()).find((q) => q.name === name);
    expect(row).toMatchObject({
      query_id: first.body.query_id,
      source_queue: src,
      sink_queue: `${src}.out`,
      config_hash: body.config_hash,
      state_rows: 2,
    });
    expect(row.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    expect(row.updated_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
  });

  it('S6 same hash without reset refreshes the queue names; the list is ordered by name', async () => {
    const base = uniqueName('s6b');
    const r1 = await register({ name: `${base}-b`, source_queue: 'q1', config_hash: 'h' });
    await register({ name: `${base}-a`, source_queue: 'q0', config_hash: 'h' });
    const r2 = await register({ name: `${base}-b`, source_queue: 'q2', sink_queue: 'q3', config_hash: 'h' });
    expect(r2.body).toMatchObject({ query_id: r1.body.query_id, fresh: false, reset: false });
    const mine = (await list()).filter((q) => q.name.startsWith(base));
    expect(mine.map((q) => q.name)).toEqual([`${base}-a`, `${base}-b`]);
    expect(mine[1]).toMatchObject({ source_queue: 'q2', sink_queue: 'q3' });
  });

  it('S7 a changed hash without reset is a 409 and changes nothing', async () => {
    const name = uniqueName('s7');
    const first = await register({ name, source_queue: 'src', config_hash: 'h1' });
    const qid = first.body.query_id;
    const pid = '00000000-0000-4000-8000-000000000007';
    const written = await writeState(qid, pid, ['k']);
    const res = await register({ name, source_queue: 'other', config_hash: 'h2' });
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ success: false, query_id: qid, name, code: 'CONFIG_HASH_MISMATCH' });
    expect(res.body.error).toMatch(/reset/);
    const row = (await list()).find((q) => q.name === name);
    expect(row).toMatchObject({ config_hash: 'h1', source_queue: 'src', state_rows: 1 });
    const state = await stateRows(qid, pid);
    expect(state.body.rows).toEqual([expect.objectContaining({ key: 'k', version: written.state_results[0].version })]);
  });

  it('S8 reset wipes all state rows (new hash or same hash) and never moves the cursor', async () => {
    const name = uniqueName('s8');
    const qid = (await register({ name, source_queue: 'src', config_hash: 'h1' })).body.query_id;
    const { src, group, pid } = await sourceWithCursor(name, qid);
    await writeState(qid, pid, ['a', 'b']);
    expect((await stateRows(qid, pid)).body.rows).toHaveLength(3);

    const reset = await register({ name, source_queue: src, config_hash: 'h2', reset: true });
    expect(reset.status).toBe(200);
    expect(reset.body).toMatchObject({ success: true, query_id: qid, config_hash: 'h2', fresh: false, reset: true });
    expect((await stateRows(qid, pid)).body.rows).toEqual([]);
    expect((await list()).find((q) => q.name === name)).toMatchObject({ config_hash: 'h2', state_rows: 0 });
    expect(await groupCursor(group, src)).toBe('1');

    // Same hash + reset wipes as well (fix).
    await writeState(qid, pid, ['a', 'b', 'c']);
    const same = await register({ name, source_queue: src, config_hash: 'h2', reset: true });
    expect(same.body).toMatchObject({ success: true, query_id: qid, reset: true });
    expect((await stateRows(qid, pid)).body.rows).toEqual([]);
    expect(await groupCursor(group, src)).toBe('1');
  });

  it('X12 bad register bodies are 400 with details and change nothing', async () => {
    const before = await list();
    const res = await register({});
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('VALIDATION_FAILED');
    const fields = res.body.details.map((d: any) => d.field);
    expect(fields).toEqual(expect.arrayContaining(['body.name', 'body.source_queue', 'body.config_hash']));

    for (const bad of [
      { name: 'x', source_queue: 'q', config_hash: '' },
      { name: 'x', source_queue: 'q', config_hash: 'h'.repeat(129) },
      { name: '', source_queue: 'q', config_hash: 'h' },
      { name: 'x', source_queue: 'a/b', config_hash: 'h' },
      { name: 'x', source_queue: 'q', config_hash: 'h', reset: 'yes' },
    ]) {
      const r = await register(bad);
      expect(r.status, JSON.stringify(bad)).toBe(400);
      expect(r.body.code).toBe('VALIDATION_FAILED');
    }
    const malformed = await b.http('POST', '/streams/v1/queries', '{"name":');
    expect(malformed.status).toBe(400);
    expect(malformed.body.code).toBe('INVALID_JSON');
    expect(await list()).toEqual(before);
  });

  it('the streams routes are in /openapi.json with their levels', async () => {
    const res = await b.http('GET', '/openapi.json');
    expect(res.status).toBe(200);
    const paths = res.body.paths;
    expect(paths['/streams/v1/queries'].post['x-queen-level']).toBe('read-write');
    expect(paths['/streams/v1/queries'].get['x-queen-level']).toBe('read-only');
    expect(paths['/streams/v1/queries/drop'].post['x-queen-level']).toBe('admin');
    expect(paths['/streams/v1/cycle'].post['x-queen-level']).toBe('read-write');
    expect(paths['/streams/v1/state/get'].post['x-queen-level']).toBe('read-only');
    const cycleBody = paths['/streams/v1/cycle'].post.requestBody.content['application/json'].schema;
    expect(cycleBody.required).toEqual(expect.arrayContaining(['query_id', 'partition_id']));
  });

  it('register, list, drop declare their levels: read-write, read-only, admin', () => {
    expect(streamRoutes.streamsRegister.level).toBe('read-write');
    expect(streamRoutes.streamsList.level).toBe('read-only');
    expect(streamRoutes.streamsDrop.level).toBe('admin');
    expect(streamRoutes.streamsCycle.level).toBe('read-write');
    expect(streamRoutes.streamsStateGet.level).toBe('read-only');
  });
});

describe('drop', () => {
  it('S9 drop deletes the query and its state; old ids are unknown; the name can be registered anew', async () => {
    const name = uniqueName('s9');
    const qid = (await register({ name, source_queue: 'src', config_hash: 'h' })).body.query_id;
    const pid = '00000000-0000-4000-8000-000000000009';
    await writeState(qid, pid, ['a', 'b', 'c']);
    await writeState(qid, '00000000-0000-4000-8000-000000000010', ['d']);

    const drop = await b.http('POST', '/streams/v1/queries/drop', { name });
    expect(drop.status).toBe(200);
    expect(drop.body).toEqual({ success: true, query_id: qid, name, state_rows_deleted: 4 });
    expect((await list()).find((q) => q.name === name)).toBeUndefined();
    const { rows } = await b.sql.query('select count(*)::int as n from queen_streams.state where query_id = $1', [qid]);
    expect(rows[0].n).toBe(0);

    const get = await stateRows(qid, pid);
    expect(get.status).toBe(404);
    expect(get.body.code).toBe('QUERY_NOT_FOUND');

    const cyc = await b.http('POST', '/streams/v1/cycle', { query_id: qid, partition_id: pid, ack: null, state_ops: [{ type: 'upsert', key: 'z', value: 1 }] });
    expect(cyc.status).toBe(200);
    expect(cyc.body).toMatchObject({ success: false, code: 'QUERY_NOT_FOUND', state_ops_applied: 0 });

    const again = await b.http('POST', '/streams/v1/queries/drop', { name });
    expect(again.status).toBe(404);
    expect(again.body.code).toBe('QUERY_NOT_FOUND');

    const re = await register({ name, source_queue: 'src', config_hash: 'h' });
    expect(re.body).toMatchObject({ success: true, fresh: true });
    expect(re.body.query_id).not.toBe(qid);
  });

  it('S9 drop waits for an in-flight cycle of the query, then deletes what it wrote', async () => {
    const name = uniqueName('s9w');
    const qid = (await register({ name, source_queue: 'src', config_hash: 'h' })).body.query_id;
    const pid = '00000000-0000-4000-8000-000000000011';
    // Hold the shard lock so the cycle is parked after taking the query row FOR KEY SHARE.
    const holder = await b.sql.connect();
    try {
      await holder.query('begin');
      await holder.query(`select pg_advisory_xact_lock(hashtextextended($1 || ':' || $2, 0))`, [qid, pid]);
      const cycle = b.http('POST', '/streams/v1/cycle', { query_id: qid, partition_id: pid, ack: null, state_ops: [{ type: 'upsert', key: 'late', value: 1 }] });
      // The cycle is waiting on the shard lock once its backend shows an advisory wait.
      const parked = async () =>
        (await b.sql.query(`select count(*)::int as n from pg_locks where locktype = 'advisory' and not granted
             and database = (select oid from pg_database where datname = current_database())`)).rows[0].n > 0;
      for (let i = 0; i < 100 && !(await parked()); i++) await sleep(50);
      expect(await parked()).toBe(true);

      let dropped = false;
      const drop = b.http('POST', '/streams/v1/queries/drop', { name }).then((r) => {
        dropped = true;
        return r;
      });
      await sleep(1000);
      expect(dropped).toBe(false); // blocked behind the cycle's FOR KEY SHARE
      await holder.query('commit');

      const c = await cycle;
      expect(c.body).toMatchObject({ success: true, state_ops_applied: 1 });
      const d = await drop;
      expect(d.status).toBe(200);
      expect(d.body.state_rows_deleted).toBe(1);
    } finally {
      await holder.query('rollback').catch(() => undefined);
      holder.release();
    }
  });

  it('S9 drop body is validated: missing name is a 400', async () => {
    const res = await b.http('POST', '/streams/v1/queries/drop', {});
    expect(res.status).toBe(400);
    expect(res.body.details.map((d: any) => d.field)).toContain('body.name');
  });
});
