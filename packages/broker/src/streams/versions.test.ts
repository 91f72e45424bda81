import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBroker, uniqueName, type TestBroker } from '@queen-mq/testing';

// Versions of a stream query over HTTP: the register's version
// fences cycles, the plan routes, and the migration claim and commit refusing
// what a client may send wrong with 4xx codes of the catalogue.

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker();
});
afterAll(async () => b?.stop());

const stage = (name: string, code: string, o: Record<string, unknown> = {}) => ({ name, kind: 'map', stateful: false, feeds_state: false, state_hash: null, code_hash: code, ...o });
const window = (hash: string) => stage('window', 'w', { kind: 'window:tumbling', stateful: true, state_hash: hash });

async function setup() {
  const src = uniqueName('ver-src');
  const name = uniqueName('ver');
  await b.http('POST', '/api/v1/push', { items: [{ queue: src, payload: { i: 1 } }] });
  const partitionId = (await b.http('GET', `/api/v1/resources/queues/${src}`)).body.partitions[0].id as string;
  const v1 = await b.http('POST', '/streams/v1/queries', { name, source_queue: src, config_hash: 'h', stages: [stage('m', 'c1'), window('w60')] });
  expect(v1.status).toBe(200);
  expect(v1.body.version).toMatch(/^[0-9a-f]{64}$/);
  const cycle = (version: string, key = 'k') =>
    b.http('POST', '/streams/v1/cycle', { query_id: v1.body.query_id, partition_id: partitionId, version, state_ops: [{ type: 'upsert', key, value: { n: 1 } }], ack: null });
  return { src, name, partitionId, v1: v1.body, cycle };
}

describe('stream query versions', () => {
  it('a cycle of a version other than the registered one is refused QUERY_VERSION_CHANGED and writes nothing', async () => {
    const { src, name, v1, cycle, partitionId } = await setup();
    expect((await cycle(v1.version)).body.success).toBe(true);
    const v2 = await b.http('POST', '/streams/v1/queries', { name, source_queue: src, config_hash: 'h', stages: [stage('m', 'c2'), window('w60')] });
    expect(v2.status).toBe(200);
    expect(v2.body.plan.verdict).toBe('safe'); // the map feeds no state here: a code change alone
    const old = await cycle(v1.version, 'k2');
    expect(old.status).toBe(200);
    expect(old.body).toMatchObject({ success: false, code: 'QUERY_VERSION_CHANGED' });
    expect(old.body.error).toMatch(/Another version/);
    const rows = await b.http('POST', '/streams/v1/state/get', { query_id: v1.query_id, partition_id: partitionId });
    expect(rows.body.rows.map((r: { key: string }) => r.key)).toEqual(['k']);
    expect((await cycle(v2.body.version, 'k2')).body.success).toBe(true);
  });

  it('plan routes: unknown query 404, nothing proposed 404, bad stages 400', async () => {
    const { name, src } = await setup();
    expect((await b.http('POST', '/streams/v1/queries/plan', { name: uniqueName('none'), config_hash: 'h', stages: [] })).body.code).toBe('QUERY_NOT_FOUND');
    const none = await b.http('GET', `/streams/v1/queries/${name}/plan`);
    expect([none.status, none.body.code]).toEqual([404, 'PLAN_NOT_FOUND']);
    const bad = await b.http('POST', '/streams/v1/queries/plan', { name, config_hash: 'h', stages: [{ name: 'm' }] });
    expect([bad.status, bad.body.code]).toEqual([400, 'VALIDATION_FAILED']);
    const badRegister = await b.http('POST', '/streams/v1/queries', { name, source_queue: src, config_hash: 'h', upgrade: 'yes' });
    expect([badRegister.status, badRegister.body.code]).toEqual([400, 'VALIDATION_FAILED']);
  });

  it('a migration: pending per partition with state, one claim at a time, a commit only with the claim, once', async () => {
    const { src, name, v1, cycle, partitionId } = await setup();
    await cycle(v1.version);
    const v2 = await b.http('POST', '/streams/v1/queries', { name, source_queue: src, config_hash: 'h2', stages: [stage('m', 'c1'), window('w120')], migrate: ['window'] });
    expect(v2.status).toBe(200);
    expect(v2.body.pending_migrations).toEqual([partitionId]);
    const base = { query_id: v1.query_id, partition_id: partitionId, version: v2.body.version };
    const [first, second] = [randomUUID(), randomUUID()];
    expect((await b.http('POST', '/streams/v1/migrations/claim', { ...base, claim_id: first })).body).toMatchObject({ claimed: true, done: false });
    expect((await b.http('POST', '/streams/v1/migrations/claim', { ...base, claim_id: second })).body).toMatchObject({ claimed: false, done: false });
    const stolen = await b.http('POST', '/streams/v1/migrations/commit', { ...base, claim_id: second, state_ops: [] });
    expect([stolen.status, stolen.body.code]).toEqual([409, 'MIGRATION_NOT_CLAIMED']);
    const stale = await b.http('POST', '/streams/v1/migrations/claim', { ...base, version: v1.version, claim_id: first });
    expect([stale.status, stale.body.code]).toEqual([409, 'QUERY_VERSION_CHANGED']);
    const conflict = await b.http('POST', '/streams/v1/migrations/commit', { ...base, claim_id: first, state_ops: [{ type: 'upsert', key: 'k', value: { n: 2 }, expected_version: 1 }] });
    expect([conflict.status, conflict.body.code]).toEqual([409, 'VERSION_CONFLICT']);
    const done = await b.http('POST', '/streams/v1/migrations/commit', { ...base, claim_id: first, state_ops: [{ type: 'upsert', key: 'k', value: { n: 2 } }] });
    expect(done.body).toEqual({ success: true, state_ops_applied: 1 });
    const again = await b.http('POST', '/streams/v1/migrations/commit', { ...base, claim_id: first, state_ops: [{ type: 'upsert', key: 'k', value: { n: 3 } }] });
    expect(again.body.code).toBe('MIGRATION_NOT_CLAIMED');
    expect((await b.http('POST', '/streams/v1/migrations/claim', { ...base, claim_id: second })).body).toMatchObject({ claimed: false, done: true });
    expect((await b.http('POST', '/streams/v1/queries', { name, source_queue: src, config_hash: 'h2', stages: [stage('m', 'c1'), window('w120')] })).body.pending_migrations).toEqual([]);
  });
});
