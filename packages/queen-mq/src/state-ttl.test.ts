import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBroker, testStream, uniqueName, type TestBroker } from '@queen-mq/testing';
import { QueenError, Stream } from './index.js';

// State that expires (issue 33): a gate's key rows unwritten for
// stateTtlSeconds are deleted by the broker's maintenance pass, on the
// broker's clock (here the test kit's virtual clock).

let b: TestBroker;
beforeAll(async () => {
  b = await startTestBroker({ virtualClock: '2026-01-05T10:00:00.000Z' });
});
afterAll(async () => b?.stop());

/** One request budget per API key: every allowed message counts one. */
const perKey = (src: string, ttl?: number) =>
  Stream.from<{ key: string }>({ name: src })
    .keyBy((m) => m.data.key)
    .gate(
      (_m, ctx) => {
        ctx.state.used = (ctx.state.used ?? 0) + 1;
        return true;
      },
      ttl === undefined ? undefined : { name: 'budget', stateTtlSeconds: ttl },
    )
    .to({ name: `${src}.out` });

const sweep = async () => {
  const res = await b.http('POST', '/api/v1/system/maintenance/run', { tasks: ['state'] });
  expect(res.status).toBe(200);
  return res.body.state.expiredDeleted as number;
};

describe('stateTtlSeconds', () => {
  it('deletes a key untouched for the TTL in the maintenance pass, keeps a key written since, and never a query without a TTL', async () => {
    const src = uniqueName('ttl');
    const t = await testStream(perKey(src, 60), { broker: b, queryId: src });
    const other = uniqueName('ttl-none');
    const never = await testStream(perKey(other), { broker: b });
    try {
      await t.push([{ key: 'a' }, { key: 'b' }]);
      await never.push([{ key: 'a' }]);
      await t.advance(30_000);
      await t.push([{ key: 'b' }]); // b is written again at +30 s
      await t.advance(30_000); // a: 60 s unwritten, b: 30 s
      expect(await sweep()).toBe(0); // the TTL must have passed, not merely been reached
      await t.advance(1);
      expect(await sweep()).toBe(1);
      const rows = await t.state();
      expect(rows.map((r) => [r.key, r.value])).toEqual([['b', { used: 2 }]]);
      expect((await never.state()).map((r) => r.key)).toEqual(['a']);
      // a starts over from an empty row.
      await t.push([{ key: 'a' }]);
      expect((await t.state()).map((r) => [r.key, r.value])).toEqual([
        ['a', { used: 1 }],
        ['b', { used: 2 }],
      ]);
      await t.advance(3_600_000);
      // The sweep takes the shard's cycle lock: held from another connection, it waits.
      const { rows: q } = await b.sql.query<{ query_id: string }>('select query_id from queen_streams.queries where name = $1', [src]);
      const shard = [q[0]!.query_id, (await t.state())[0]!.partitionId];
      const held = await b.sql.connect();
      await held.query(`select pg_advisory_lock(hashtextextended($1::uuid::text || ':' || $2::uuid::text, 0))`, shard);
      let swept: number | undefined;
      const sweeping = sweep().then((n) => (swept = n));
      await new Promise((r) => setTimeout(r, 300));
      expect(swept).toBeUndefined();
      await held.query(`select pg_advisory_unlock(hashtextextended($1::uuid::text || ':' || $2::uuid::text, 0))`, shard);
      held.release();
      expect(await sweeping).toBe(2);
      expect(await t.state()).toEqual([]);
      expect((await never.state()).map((r) => r.key)).toEqual(['a']);
    } finally {
      await t.stop();
      await never.stop();
    }
  });

  it('is refused on a window, and must be a positive integer', () => {
    const s = Stream.from({ name: 'x' });
    expect(() => s.windowTumbling({ seconds: 60 }, { stateTtlSeconds: 60 })).toThrow(QueenError);
    expect(() => s.windowTumbling({ seconds: 60 }, { stateTtlSeconds: 60 })).toThrow(/not a window/);
    expect(() => s.gate(() => true, { stateTtlSeconds: 0 })).toThrow(/1\.\.315360000/);
    expect(() => s.map((m) => m, { stateTtlSeconds: 5 })).toThrow(/not a window \(a gate\)/);
  });
});
