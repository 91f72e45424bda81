import { beforeAll, describe, expect, it } from 'vitest';
import { eventually, type TestBroker } from '@queen-mq/testing';
import { stepQuery } from '@queen-mq/core';
import { type Queen, QueenError, Stream, type MigratedRow, type SourceMessage } from './index.js';
import { collectUntil, configureSource, push, sleep, runDefaults, SEP, stateRows, useStreamBroker } from '../test/helpers.js';

// Queries that evolve (issue 33), over a real broker: a new version of a
// query is compared with the registered one stage by stage; a change that
// keeps the state's meaning resumes with every open window, a window of
// another size is refused unless reset or migrated, and a migration runs
// once per partition even when two runners of the new version start together.

const env = useStreamBroker();
const { names, track } = env;
let b: TestBroker;
let queen: Queen;
beforeAll(() => {
  ({ b, queen } = env);
});

type Sale = { ts: string; amount: number; shop?: string };

/** Version 1: minute sums of sales, by event time. */
function v1(src: string, sink: string) {
  return Stream.from<Sale>(queen.queue(src))
    .map((m: SourceMessage<Sale>) => m.data, { name: 'enrich' })
    .windowTumbling({ seconds: 60, idleFlushMs: 0, eventTime: (s: Sale) => s.ts }, { name: 'per-minute' })
    .aggregate({ total: (s: Sale) => s.amount })
    .to(queen.queue(sink));
}

const run = { ...runDefaults, onError: (e: Error, info: unknown) => console.error('onError', info, e.message) };

const at = (minute: number, second: number) => `2026-01-05T10:${String(minute).padStart(2, '0')}:${String(second).padStart(2, '0')}.000Z`;

async function refusal(p: Promise<unknown>): Promise<QueenError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(QueenError);
  return err as QueenError;
}

describe('deploying a new version of a query', () => {
  it('a map changed and a filter added before the window: plan says keep-state, run refuses without consent and resumes with every open window with it; results exact across the deploy', async () => {
    const { src, sink, queryId } = await names('upg-map');
    const h1 = await v1(src, sink).run({ queryId, url: b.url, ...run });
    // Minute 0 closes when minute 1 arrives; minute 1 stays open across the deploy.
    const [p] = await push(b, src, [
      { ts: at(0, 5), amount: 1 },
      { ts: at(0, 50), amount: 2 },
      { ts: at(1, 10), amount: 10 },
      { ts: at(1, 20), amount: 20 },
    ]);
    await collectUntil(b, sink, (all) => all.length >= 1, 10000);
    await eventually(async () => (await stateRows(b, h1.queryUuid, p!.partition_id)).length === 2, 10000);
    await h1.stop(); // the old code is gone
    const openBefore = (await stateRows(b, h1.queryUuid, p!.partition_id)).filter((r) => r.key.startsWith('tumb:'));
    expect(openBefore.map((r) => r.value.acc)).toEqual([{ total: 30 }]);

    // Version 2: the map now tags the shop, and a filter drops refunds, both before the window.
    const v2 = Stream.from<Sale>(queen.queue(src))
      .map((m: SourceMessage<Sale>) => ({ ...m.data, shop: 'main' }), { name: 'enrich' })
      .filter((s: Sale) => s.amount > 0)
      .windowTumbling({ seconds: 60, idleFlushMs: 0, eventTime: (s: Sale) => s.ts }, { name: 'per-minute' })
      .aggregate({ total: (s: Sale) => s.amount })
      .to(queen.queue(sink));

    const plan = await v2.plan({ queryId, url: b.url });
    expect(plan.plan.verdict).toBe('keep-state');
    expect(plan.state_rows).toBe(2); // the open window and the watermark
    expect(plan.plan.stages.map((s) => [s.name, s.change, s.state_action])).toEqual([
      ['enrich', 'state-compatible', 'none'],
      ['filter-1', 'added', 'none'],
      ['per-minute', 'unchanged', 'keep'],
      ['reducer', 'unchanged', 'keep'],
      ['sink', 'unchanged', 'none'],
    ]);

    const refused = await refusal(v2.run({ queryId, url: b.url, ...run }));
    expect(refused.code).toBe('CONFIG_HASH_MISMATCH');
    expect((refused.extra as { plan?: { verdict: string } }).plan?.verdict).toBe('keep-state');
    // The refusal changed nothing.
    expect(await stateRows(b, h1.queryUuid, p!.partition_id)).toEqual(await stateRows(b, h1.queryUuid, p!.partition_id));

    const h2 = track(await v2.run({ queryId, url: b.url, ...run, upgrade: 'keep-state' }));
    expect(h2.queryUuid).toBe(h1.queryUuid);
    const kept = (await stateRows(b, h2.queryUuid, p!.partition_id)).filter((r) => r.key.startsWith('tumb:'));
    expect(kept).toEqual(openBefore); // same rows, same versions: nothing rewritten
    await push(b, src, [
      { ts: at(1, 30), amount: 40 },
      { ts: at(1, 40), amount: -5 }, // dropped by the new filter
      { ts: at(2, 30), amount: 200 },
      { ts: at(3, 0), amount: 1000 },
    ]);
    const got = await collectUntil(b, sink, (all) => all.length >= 3, 10000, 300);
    // Minute 1 holds what version 1 folded and what version 2 folded, once each.
    expect(got.map((m) => m.data)).toEqual([{ total: 3 }, { total: 70 }, { total: 200 }]);
  });

  it('a window of another size is refused by plan and run unless reset; reset wipes the state', async () => {
    const { src, sink, queryId } = await names('upg-size');
    const h1 = await v1(src, sink).run({ queryId, url: b.url, ...run });
    const [p] = await push(b, src, [{ ts: at(0, 5), amount: 1 }]);
    await eventually(async () => (await stateRows(b, h1.queryUuid, p!.partition_id)).length === 2, 10000);
    await h1.stop();

    const wider = Stream.from<Sale>(queen.queue(src))
      .map((m: SourceMessage<Sale>) => m.data, { name: 'enrich' })
      .windowTumbling({ seconds: 120, idleFlushMs: 0, eventTime: (s: Sale) => s.ts }, { name: 'per-minute' })
      .aggregate({ total: (s: Sale) => s.amount })
      .to(queen.queue(sink));
    const plan = await wider.plan({ queryId, url: b.url });
    expect(plan.plan.verdict).toBe('blocked');
    expect(plan.plan.blocking).toEqual(['per-minute']);
    expect(plan.plan.stages.find((s) => s.name === 'per-minute')).toMatchObject({ change: 'state-incompatible', state_rows: 2, state_action: 'drop' });

    expect((await refusal(wider.run({ queryId, url: b.url, ...run }))).code).toBe('CONFIG_HASH_MISMATCH');
    expect((await refusal(wider.run({ queryId, url: b.url, ...run, upgrade: 'keep-state' }))).code).toBe('CONFIG_HASH_MISMATCH');
    expect(await stateRows(b, h1.queryUuid, p!.partition_id)).toHaveLength(2);

    const h2 = track(await wider.run({ queryId, url: b.url, ...run, reset: true }));
    expect(await stateRows(b, h2.queryUuid, p!.partition_id)).toEqual([]);
  });

  it('a migrateState runs once per partition, each in one commit, while two runners of the new version start together', async () => {
    const { src, sink, queryId } = await names('upg-migrate');
    const h1 = await v1(src, sink).run({ queryId, url: b.url, ...run });
    const pa = await push(b, src, [{ ts: at(0, 5), amount: 1 }, { ts: at(0, 6), amount: 2 }], 'a');
    const pb = await push(b, src, [{ ts: at(0, 7), amount: 4 }], 'b');
    const holds = async (partitionId: string) => (await stateRows(b, h1.queryUuid, partitionId)).length === 2;
    await eventually(async () => (await holds(pa[0]!.partition_id)) && holds(pb[0]!.partition_id), 10000);
    await h1.stop();

    // Version 2 adds a field to the reducer: the rows' meaning changes, and migrateState fills it in.
    const calls: string[] = [];
    const migrateState = (row: MigratedRow): MigratedRow => {
      calls.push(row.key);
      const value = row.value as { acc: { total: number } };
      return { key: row.key, value: { ...value, acc: { ...value.acc, cents: value.acc.total * 100 } } };
    };
    const v2 = () =>
      Stream.from<Sale>(queen.queue(src))
        .map((m: SourceMessage<Sale>) => m.data, { name: 'enrich' })
        .windowTumbling({ seconds: 60, idleFlushMs: 0, eventTime: (s: Sale) => s.ts }, { name: 'per-minute' })
        .aggregate({ total: (s: Sale) => s.amount, cents: (s: Sale) => s.amount * 100 }, { name: 'reducer', migrateState })
        .to(queen.queue(sink));
    const plan = await v2().plan({ queryId, url: b.url });
    expect(plan.plan.verdict).toBe('keep-state');
    expect(plan.plan.stages.find((s) => s.name === 'reducer')).toMatchObject({ change: 'state-incompatible', state_action: 'migrate' });

    // Partition a's lock held from another connection: the runner that claims a cannot commit its migration,
    // and the other one must wait for it rather than run, or migrate a second time.
    const held = await b.sql.connect();
    const lockA = [h1.queryUuid, pa[0]!.partition_id];
    await held.query(`select pg_advisory_lock(hashtextextended($1::uuid::text || ':' || $2::uuid::text, 0))`, lockA);
    let started = 0;
    const starting = [v2().run({ queryId, url: b.url, ...run }), v2().run({ queryId, url: b.url, ...run })].map((p) => p.then((h) => (started++, track(h))));
    const claimed = async () =>
      (await b.sql.query('select 1 from queen_streams.state_migrations where partition_id = $1 and claim_id is not null and done_at is null', [pa[0]!.partition_id])).rowCount === 1;
    await eventually(claimed, 10000);
    await sleep(500);
    expect(started).toBe(0); // neither version-2 runner runs before partition a is migrated
    await held.query(`select pg_advisory_unlock(hashtextextended($1::uuid::text || ':' || $2::uuid::text, 0))`, lockA);
    held.release();
    const [r1] = await Promise.all(starting);
    // One call per window row, whichever runner claimed its partition; the watermark rows are never handed over.
    expect(calls.sort()).toEqual([`tumb:60${SEP}${at(0, 0)}${SEP}${pa[0]!.partition_id}`, `tumb:60${SEP}${at(0, 0)}${SEP}${pb[0]!.partition_id}`].sort());
    const { rows } = await b.sql.query<{ partition_id: string; done: boolean; rows_written: number }>(
      'select partition_id, done_at is not null as done, rows_written from queen_streams.state_migrations where query_id = $1 order by partition_id',
      [r1!.queryUuid],
    );
    expect(rows.map((r) => [r.done, r.rows_written])).toEqual([
      [true, 1],
      [true, 1],
    ]);

    await push(b, src, [{ ts: at(1, 0), amount: 8 }], 'a');
    await push(b, src, [{ ts: at(1, 0), amount: 16 }], 'b');
    const got = await collectUntil(b, sink, (all) => all.length >= 2, 10000, 300);
    expect(got.map((m) => m.data).sort((x, y) => x.total - y.total)).toEqual([
      { total: 3, cents: 300 },
      { total: 4, cents: 400 },
    ]);
    // A third runner of the same version finds nothing left to migrate.
    track(await v2().run({ queryId, url: b.url, ...run }));
    expect(calls).toHaveLength(2);
  });

  it('two versions never commit at once: once a new version is registered, a runner of the old one is refused QUERY_VERSION_CHANGED; the new one takes over', async () => {
    const { src, sink, queryId } = await names('upg-fence');
    await configureSource(b, src, { leaseTime: 1 });
    // The code hash is the functions' source text: the two versions differ in it (a captured variable would not).
    const tags = [(m: SourceMessage<{ x: number }>) => ({ v: 1, x: m.data.x }), (m: SourceMessage<{ x: number }>) => ({ v: 2, x: m.data.x })];
    const version = (v: number) => Stream.from<{ x: number }>(queen.queue(src)).map(tags[v - 1]!, { name: 'tag' }).to(queen.queue(sink));
    const errors: string[] = [];
    const old = track(await stepQuery(version(1).compile(), { queryId, url: b.url, ...run, onError: (e: Error) => errors.push((e as QueenError).code) }));
    await push(b, src, [{ x: 1 }]);
    expect(await old.step()).toBe(1);

    // Version 2 (the map's code changed: safe, no consent needed) is registered; its runner is not running yet.
    await (await version(2).run({ queryId, url: b.url, ...run })).stop();
    await push(b, src, [{ x: 2 }]);
    expect(await old.step()).toBe(1); // popped, but its commit is refused
    expect(errors).toEqual(['QUERY_VERSION_CHANGED']);
    expect(old.metrics().cyclesTotal).toBe(1);

    track(await version(2).run({ queryId, url: b.url, ...run }));
    const got = await collectUntil(b, sink, (all) => all.length >= 2, 10000, 300);
    expect(got.map((m) => m.data)).toEqual([
      { v: 1, x: 1 },
      { v: 2, x: 2 },
    ]);
  });

  it('a running runner of the old version stops at its first refused cycle instead of popping again', async () => {
    const { src, sink, queryId } = await names('upg-halt');
    await configureSource(b, src, { leaseTime: 1 });
    const tags = [(m: SourceMessage<{ x: number }>) => ({ v: 1, x: m.data.x }), (m: SourceMessage<{ x: number }>) => ({ v: 2, x: m.data.x })];
    const version = (v: number) => Stream.from<{ x: number }>(queen.queue(src)).map(tags[v - 1]!, { name: 'tag' }).to(queen.queue(sink));
    const errors: string[] = [];
    const old = track(await version(1).run({ queryId, url: b.url, ...run, onError: (e: Error) => errors.push((e as QueenError).code) }));
    await (await version(2).run({ queryId, url: b.url, ...run })).stop();
    await push(b, src, [{ x: 1 }]);
    await eventually(async () => errors.length > 0, 10000);
    await sleep(2500); // two lease lengths: a runner still popping would have been refused again
    expect(errors).toEqual(['QUERY_VERSION_CHANGED']);
    expect(old.metrics().cyclesTotal).toBe(0);
    track(await version(2).run({ queryId, url: b.url, ...run }));
    const got = await collectUntil(b, sink, (all) => all.length >= 1, 10000, 300);
    expect(got.map((m) => m.data)).toEqual([{ v: 2, x: 1 }]);
  });
});
