import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// POST /streams/v1/state/get (PROTOCOL §7.5) over HTTP against a real PostgreSQL.

let b: TestBroker;
let qid: string;
const pid = '00000000-0000-4000-8000-0000000000a1';
const otherPid = '00000000-0000-4000-8000-0000000000a2';

async function upsert(partitionId: string, rows: { key: string; value: unknown }[]) {
  const res = await b.http('POST', '/streams/v1/cycle', {
    query_id: qid,
    partition_id: partitionId,
    ack: null,
    state_ops: rows.map((r) => ({ type: 'upsert', ...r })),
  });
  expect(res.body).toMatchObject({ success: true, state_ops_applied: rows.length });
}

async function get(body: Record<string, unknown>) {
  return b.http('POST', '/streams/v1/state/get', { query_id: qid, partition_id: pid, ...body });
}

const keysOf = (res: { body: any }) => res.body.rows.map((r: any) => r.key);

beforeAll(async () => {
  b = await startTestBroker();
  const reg = await b.http('POST', '/streams/v1/queries', { name: uniqueName('state'), source_queue: 'src', config_hash: 'h' });
  qid = reg.body.query_id;
  await upsert(pid, [
    { key: 'a%b', value: { windowEnd: 1000 } },
    { key: 'axb', value: { windowEnd: 1001 } },
    { key: 'a_c', value: { acc: 1 } },
    { key: 'abc', value: { windowEnd: '999' } },
    { key: '__wm__', value: { eventTimeMs: 5 } },
    { key: 'a\\d', value: { windowEnd: 10 } },
    { key: 'B', value: 1 },
    { key: 'é', value: { windowEnd: 1000.5 } },
    { key: 'aé', value: { windowEnd: -3 } },
  ]);
  await upsert(otherPid, [{ key: 'a%b', value: { windowEnd: 0 } }]);
});
afterAll(async () => b?.stop());

it('S32 key_prefix is literal: % _ and \\ are ordinary characters', async () => {
  expect(keysOf(await get({ key_prefix: 'a%' }))).toEqual(['a%b']);
  expect(keysOf(await get({ key_prefix: 'a_' }))).toEqual(['a_c']);
  expect(keysOf(await get({ key_prefix: 'a\\' }))).toEqual(['a\\d']);
  expect(keysOf(await get({ key_prefix: '__' }))).toEqual(['__wm__']);
  expect(keysOf(await get({ key_prefix: 'a' }))).toEqual(['a%b', 'a\\d', 'a_c', 'abc', 'axb', 'aé']);
  expect(keysOf(await get({ key_prefix: 'zz' }))).toEqual([]);
});

it('S32 keys is exact membership; unknown keys are simply absent', async () => {
  expect(keysOf(await get({ keys: ['abc', 'zzz'] }))).toEqual(['abc']);
  expect(keysOf(await get({ keys: ['a%', 'A%B'] }))).toEqual([]);
});

it('S32 ripe_at_or_before matches value.windowEnd as a JSON number only', async () => {
  // 1000 and -3 and 10 are ≤ 1000; 1001 and 1000.5 are not; "999" is a string; rows without windowEnd never match.
  expect(keysOf(await get({ ripe_at_or_before: 1000 }))).toEqual(['a%b', 'a\\d', 'aé']);
  expect(keysOf(await get({ ripe_at_or_before: 1000.5 }))).toEqual(['a%b', 'a\\d', 'aé', 'é']);
  expect(keysOf(await get({ ripe_at_or_before: -4 }))).toEqual([]);
});

it('S32 filters are ANDed; empty filters match all; rows sorted bytewise with version and updated_at', async () => {
  expect(keysOf(await get({ key_prefix: 'a', ripe_at_or_before: 1000, keys: ['a%b', 'axb', 'aé'] }))).toEqual(['a%b', 'aé']);
  const all = await get({ keys: [], key_prefix: '' });
  expect(all.status).toBe(200);
  expect(all.body.success).toBe(true);
  // Bytewise (C collation): 'B' 0x42 < '_' 0x5F < 'a' 0x61 < 'é' 0xC3; 'a\\d' 0x5C before 'a_c' 0x5F.
  expect(keysOf(all)).toEqual(['B', '__wm__', 'a%b', 'a\\d', 'a_c', 'abc', 'axb', 'aé', 'é']);
  const versions = all.body.rows.map((r: any) => r.version);
  for (const r of all.body.rows) {
    expect(typeof r.version).toBe('number');
    expect(r.version).toBeGreaterThan(0);
    expect(r.updated_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
  }
  expect(new Set(versions).size).toBe(versions.length);
  expect(all.body.rows.find((r: any) => r.key === 'a%b').value).toEqual({ windowEnd: 1000 });
  // Another partition's rows are another shard.
  const other = await get({ partition_id: otherPid });
  expect(other.body.rows).toEqual([expect.objectContaining({ key: 'a%b', value: { windowEnd: 0 } })]);
});

it('S33 missing or non-UUID ids are 400; an unknown query is 404 QUERY_NOT_FOUND', async () => {
  const missing = await b.http('POST', '/streams/v1/state/get', { query_id: qid });
  expect(missing.status).toBe(400);
  expect(missing.body.code).toBe('VALIDATION_FAILED');
  expect(missing.body.details.map((d: any) => d.field)).toContain('body.partition_id');

  const badQuery = await b.http('POST', '/streams/v1/state/get', { query_id: 'nope', partition_id: pid });
  expect(badQuery.status).toBe(400);
  expect(badQuery.body.details.map((d: any) => d.field)).toContain('body.query_id');

  const unknown = await b.http('POST', '/streams/v1/state/get', { query_id: '00000000-0000-4000-8000-00000000dead', partition_id: pid });
  expect(unknown.status).toBe(404);
  expect(unknown.body.code).toBe('QUERY_NOT_FOUND');
});

it('X6 state/get partition_id:42 is a 400, never a 500; bad filters are 400 too', async () => {
  const res = await b.http('POST', '/streams/v1/state/get', { query_id: qid, partition_id: 42 });
  expect(res.status).toBe(400);
  expect(res.body.code).toBe('VALIDATION_FAILED');
  expect(res.body.details.map((d: any) => d.field)).toContain('body.partition_id');
  for (const bad of [{ keys: 'abc' }, { keys: [''] }, { key_prefix: 5 }, { ripe_at_or_before: '1000' }, { keys: Array(1001).fill('k') }, { key_prefix: 'a\u0000' }]) {
    const r = await get(bad);
    expect(r.status, JSON.stringify(bad).slice(0, 60)).toBe(400);
    expect(r.body.code).toBe('VALIDATION_FAILED');
  }
});
